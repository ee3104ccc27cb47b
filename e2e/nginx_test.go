package e2e

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// nginx is an nginx process in front of an upstream, on a free loopback
// port, with its configuration, pid file, logs and temp files in a
// directory of the test's.
type nginx struct {
	url string // http://127.0.0.1:port
	dir string
}

func nginxBinary() (string, error) {
	for _, p := range []string{"nginx", "/usr/sbin/nginx", "/usr/local/sbin/nginx", "/usr/local/nginx/sbin/nginx"} {
		if p, err := exec.LookPath(p); err == nil {
			return p, nil
		}
	}
	return "", errors.New("nginx not found in PATH nor in /usr/sbin")
}

// nginxPreamble starts every configuration: one process in the
// foreground, its pid file, logs and temp files in the test's directory.
// The http block it opens is the configuration's to fill and close.
const nginxPreamble = `daemon off;
master_process off;
pid {{dir}}/nginx.pid;
error_log {{dir}}/error.log warn;
events { worker_connections 1024; }
http {
	access_log off;
	client_body_temp_path {{dir}}/body;
	proxy_temp_path {{dir}}/proxy;
	fastcgi_temp_path {{dir}}/fastcgi;
	uwsgi_temp_path {{dir}}/uwsgi;
	scgi_temp_path {{dir}}/scgi;
`

// The configuration: /slow/ has a short read timeout (504), /limited/
// allows one request a second per client (429, with a Retry-After of one
// second that nginx adds to its 429 only: an empty add_header value adds
// nothing), and everything goes to one upstream, so nginx never marks it
// down and every failure is its own.
const nginxConf = nginxPreamble + `	limit_req_zone $binary_remote_addr zone=perclient:1m rate=1r/s;
	map $status $retry_after { 429 1; default ""; }
	upstream app {
		server {{upstream}};
		keepalive 16;
	}
	server {
		listen 127.0.0.1:{{port}};
		proxy_http_version 1.1;
		proxy_set_header Connection "";
		proxy_connect_timeout 1s;
		proxy_read_timeout 2s;
		proxy_next_upstream off;
		location / { proxy_pass http://app; }
		location /slow/ {
			proxy_read_timeout 300ms;
			proxy_pass http://app;
		}
		location /limited/ {
			limit_req zone=perclient nodelay;
			limit_req_status 429;
			add_header Retry-After $retry_after always;
			proxy_pass http://app;
		}
	}
}
`

// startNginx starts nginx in front of upstream ("host:port"). Without
// nginx the test is skipped, or fails under CI=true, where .ci/run has
// installed it.
func startNginx(t testing.TB, upstream string) *nginx {
	t.Helper()
	return startNginxConf(t, strings.ReplaceAll(nginxConf, "{{upstream}}", upstream))
}

// startNginxConf starts nginx with the configuration conf, in which
// {{dir}} and {{port}} are filled in with the test's directory and a free
// port.
func startNginxConf(t testing.TB, conf string) *nginx {
	t.Helper()
	bin, err := nginxBinary()
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%v: CI must install it (.ci/run does: apt-get install nginx)", err)
		}
		skipf(t, "%v; install it (apt-get install nginx) to run the gateway tests", err)
	}
	dir := t.TempDir()
	for _, d := range []string{"body", "proxy", "fastcgi", "uwsgi", "scgi"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	// The free port is found by binding it and letting go, so another
	// process may take it before nginx does: then nginx exits at once and
	// the next try picks another port.
	for try := 1; ; try++ {
		port, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		text := strings.NewReplacer("{{dir}}", dir, "{{port}}", port).Replace(conf)
		path := filepath.Join(dir, "nginx.conf")
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, "-p", dir, "-c", path, "-e", filepath.Join(dir, "error.log"))
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan struct{})
		go func() {
			cmd.Wait()
			close(exited)
		}()
		addr := net.JoinHostPort("127.0.0.1", port)
		if err := awaitListening(addr, exited, 5*time.Second); err != nil {
			stopProcess(cmd, exited)
			log, _ := os.ReadFile(filepath.Join(dir, "error.log"))
			if try < 3 {
				continue
			}
			t.Fatalf("nginx did not start: %v\n%s", err, log)
		}
		t.Cleanup(func() { stopProcess(cmd, exited) })
		return &nginx{url: "http://" + addr, dir: dir}
	}
}

func freePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	_, port, err := net.SplitHostPort(ln.Addr().String())
	return port, err
}

// awaitListening waits until addr accepts connections, the process exits,
// or within passes.
func awaitListening(addr string, exited <-chan struct{}, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		select {
		case <-exited:
			return errors.New("exited")
		default:
		}
		c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond)
		if err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not listening on %s after %v: %v", addr, within, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// stopProcess asks the process to stop (SIGQUIT would wait for clients,
// SIGTERM does not), and kills it if it has not exited in 3 seconds.
func stopProcess(cmd *exec.Cmd, exited <-chan struct{}) {
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(3 * time.Second):
		cmd.Process.Kill()
		<-exited
	}
}
