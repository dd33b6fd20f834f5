package rwlock

// The package installs as its users install it: an empty module, `go mod
// edit -replace` of the module path to this checkout, `go get`, and the
// README's quick start built and run as written against a server (its
// address, localhost:6399 in the README, swapped for the test server's).

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// modulePathName is the module's path; the package is its rwlock directory,
// so that an import needs no alias.
const modulePathName = "github.com/rwlock/rwlock/clients/go"

// quickStart is the README's first Go block after "## Quick start".
func quickStart(t *testing.T) string {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(readme), "## Quick start")
	if !ok {
		t.Fatal("README.md has no Quick start")
	}
	_, rest, ok = strings.Cut(rest, "```go\n")
	if !ok {
		t.Fatal("the Quick start has no go block")
	}
	code, _, ok := strings.Cut(rest, "```")
	if !ok || !strings.Contains(code, "localhost:6399") {
		t.Fatal("the Quick start's go block is not closed, or does not use localhost:6399")
	}
	return code
}

func TestInstallAndQuickStart(t *testing.T) {
	t.Parallel()
	code := quickStart(t)
	s := startServer(t)
	checkout, err := filepath.Abs("..") // the module's root
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(strings.ReplaceAll(code, "localhost:6399", s.addr())), 0o644); err != nil {
		t.Fatal(err)
	}
	// The checkout's go.sum vouches for the dependencies' hashes, so the
	// checksum database is not needed.
	sum, err := os.ReadFile("../go.sum")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.sum"), sum, 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(timeout time.Duration, name string, args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
		cmd.WaitDelay = time.Second
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	run(time.Minute, "go", "mod", "init", "example.com/quickstart")
	run(time.Minute, "go", "mod", "edit", "-replace", modulePathName+"="+checkout)
	run(2*time.Minute, "go", "get", modulePathName+"@v0.0.0")
	run(2*time.Minute, "go", "mod", "tidy")
	run(2*time.Minute, "go", "build", "-o", "quickstart", ".")
	out := run(time.Minute, filepath.Join(dir, "quickstart"))
	for _, want := range []string{"holding invoice:42 as ", "writing orders", "ledger token 1"} {
		if !strings.Contains(out, want) {
			t.Fatalf("the quick start printed %q, want %q in it", out, want)
		}
	}
	if got := s.do(t, "EXISTS", "invoice:42", "orders", "ledger"); got != int64(0) {
		t.Fatal("the quick start left holds")
	}
}
