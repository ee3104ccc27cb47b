// Package redisbench compares go-redis/v9 and rueidis as the Redis client
// of module fleet: the latency of the fleet's operations, their
// allocations, and how each client behaves when Redis is slow, silent,
// reset, down or restarted empty (cmd/rb, run_rounds.sh). It chose
// rueidis; docs/fleet.md gives the figures. Its benchmarks and cmd/rb
// start their own redis-server.
package redisbench

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Server is a redis-server child process on loopback.
type Server struct {
	Port int
	cmd  *exec.Cmd
}

// FreePort asks the kernel for a free loopback port.
func FreePort() int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	p := l.Addr().(*net.TCPAddr).Port
	l.Close()
	return p
}

// StartRedis starts redis-server on port (0 = pick one) with no persistence.
func StartRedis(port int) *Server {
	if port == 0 {
		port = FreePort()
	}
	s := &Server{Port: port}
	s.start()
	return s
}

func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.Port) }

func (s *Server) start() {
	s.cmd = exec.Command("redis-server", "--port", strconv.Itoa(s.Port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--daemonize", "no", "--loglevel", "warning",
		"--protected-mode", "yes")
	if os.Getenv("RB_REDIS_LOG") != "" {
		s.cmd.Stdout, s.cmd.Stderr = os.Stderr, os.Stderr
	}
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := s.cmd.Start(); err != nil {
		panic(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := net.DialTimeout("tcp", s.Addr(), 50*time.Millisecond); err == nil {
			fmt.Fprintf(c, "PING\r\n")
			c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
			line, _ := bufio.NewReader(c).ReadString('\n')
			c.Close()
			if strings.HasPrefix(line, "+PONG") {
				return
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	panic("redis-server did not start on " + s.Addr())
}

// Kill stops the server abruptly (SIGKILL: the kernel closes its sockets).
func (s *Server) Kill() {
	if s.cmd != nil && s.cmd.Process != nil {
		s.cmd.Process.Kill()
		s.cmd.Wait()
		s.cmd = nil
	}
}

// Restart kills the server and starts an empty one on the same port after gap.
func (s *Server) Restart(gap time.Duration) {
	s.Kill()
	time.Sleep(gap)
	s.start()
}

// Raw sends one inline command on a fresh connection and returns the first line.
func (s *Server) Raw(cmd string) string {
	c, err := net.DialTimeout("tcp", s.Addr(), time.Second)
	if err != nil {
		return "ERR " + err.Error()
	}
	defer c.Close()
	fmt.Fprintf(c, "%s\r\n", cmd)
	c.SetReadDeadline(time.Now().Add(time.Second))
	line, _ := bufio.NewReader(c).ReadString('\n')
	return strings.TrimSpace(line)
}

// RawMulti sends inline commands on one connection and waits for all replies.
func (s *Server) RawMulti(cmds []string) error {
	c, err := net.DialTimeout("tcp", s.Addr(), time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	w := bufio.NewWriter(c)
	for _, cmd := range cmds {
		fmt.Fprintf(w, "%s\r\n", cmd)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	r := bufio.NewReader(c)
	for range cmds {
		if _, err := r.ReadString('\n'); err != nil {
			return err
		}
	}
	return nil
}
