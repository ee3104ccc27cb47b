// Package fleettest starts a real redis-server for the tests of programs
// that share state through package fleet, as net/http/httptest starts a
// server: on loopback, on a port the kernel picks, without persistence,
// stopped when the test ends.
package fleettest

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Server is a redis-server process on loopback. Its zero value is not
// usable: Start makes one.
type Server struct {
	// Addr is the server's "127.0.0.1:port".
	Addr string

	t    testing.TB
	path string
	port int
	cmd  *exec.Cmd
}

// Start starts redis-server (from PATH, or /usr/bin or /usr/sbin) for the
// test t and stops it when t ends. Without redis-server t is skipped,
// except when the environment variable CI is "true": then it fails, so
// that a CI machine that lacks it never passes by skipping.
func Start(t testing.TB) *Server {
	t.Helper()
	path, err := exec.LookPath("redis-server")
	if err != nil {
		for _, p := range []string{"/usr/bin/redis-server", "/usr/sbin/redis-server"} {
			if _, err := os.Stat(p); err == nil {
				path = p
			}
		}
	}
	if path == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("redis-server is not installed (apt-get install redis-server); CI=true: failing, not skipping")
		}
		t.Skip("redis-server is not installed (apt-get install redis-server)")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	s := &Server{t: t, path: path, port: port, Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port))}
	s.start()
	t.Cleanup(s.Stop)
	return s
}

func (s *Server) start() {
	s.t.Helper()
	s.cmd = exec.Command(s.path, "--port", strconv.Itoa(s.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--daemonize", "no", "--loglevel", "warning")
	if os.Getenv("FLEETTEST_REDIS_LOG") != "" {
		s.cmd.Stdout, s.cmd.Stderr = os.Stderr, os.Stderr // its warnings are noise otherwise
	}
	if err := s.cmd.Start(); err != nil {
		s.t.Fatalf("starting redis-server: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if strings.HasPrefix(s.Do("PING"), "+PONG") {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	s.t.Fatalf("redis-server did not answer on %s within 10 s", s.Addr)
}

// Stop kills the server at once, as a crash would; the kernel closes its
// connections. It does nothing if the server is stopped.
func (s *Server) Stop() {
	if s.cmd == nil {
		return
	}
	s.cmd.Process.Kill()
	s.cmd.Wait()
	s.cmd = nil
}

// Restart stops the server and starts an empty one on the same address:
// Redis restarted without its data.
func (s *Server) Restart() {
	s.t.Helper()
	s.Stop()
	s.start()
}

// Do sends one command, in Redis's inline form ("SET k v"), on a
// connection of its own and returns the first line of the reply, or
// "ERR " and what failed.
func (s *Server) Do(cmd string) string {
	c, err := net.DialTimeout("tcp", s.Addr, time.Second)
	if err != nil {
		return "ERR " + err.Error()
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := fmt.Fprintf(c, "%s\r\n", cmd); err != nil {
		return "ERR " + err.Error()
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return "ERR " + err.Error()
	}
	return strings.TrimSpace(line)
}
