package image

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const testVersion = "v9.8.7-6-gabcdef0"

// svcBin is cmd/svc built as `make build` builds it (static, stamped), once for the package's tests.
var svcBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "svcimage-")
	if err != nil {
		panic(err)
	}
	svcBin = filepath.Join(dir, "svc")
	// Static (CGO_ENABLED=0) and stamped, as `make build` builds it; without -trimpath, so that the
	// build cache of other builds serves (a cold build of the module on a busy 2-core machine takes minutes).
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	cmd := exec.CommandContext(ctx, "go", "build",
		"-ldflags", "-s -w -X github.com/svcdev/svc/internal/version.stamped="+testVersion, "-o", svcBin, "../../cmd/svc")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	out, err := cmd.CombinedOutput()
	cancel()
	if err != nil {
		os.RemoveAll(dir)
		panic(fmt.Sprintf("build svc: %v\n%s", err, out))
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// tarFiles reads every regular file of a tar stream into memory, by name.
func tarFiles(t *testing.T, r io.Reader) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[h.Name] = b
	}
}

// The tarball `make image` writes, read the way `docker load` reads it (manifest.json, the config, the
// layers checked against the config's diff ids) with nothing but the standard library, then unpacked
// into a folder where the binary runs and says its version.
func TestImageTarballUnpacksAndRuns(t *testing.T) {
	if _, err := os.Stat(CACertsPath); err != nil {
		t.Skipf("no CA bundle on this machine (%v): make test-deps installs ca-certificates", err)
	}
	img, err := Build(Options{Binary: svcBin, Version: testVersion, Revision: "0123456789abcdef", Source: "https://github.com/svcdev/svc",
		Created: time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)})
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "svc-image.tar")
	if err := WriteTarball(out, "svc:"+testVersion, img); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	files := tarFiles(t, f)

	var manifest []struct {
		Config   string
		RepoTags []string
		Layers   []string
	}
	if err := json.Unmarshal(files["manifest.json"], &manifest); err != nil {
		t.Fatalf("manifest.json: %v", err)
	}
	if len(manifest) != 1 || len(manifest[0].RepoTags) != 1 || manifest[0].RepoTags[0] != "svc:"+testVersion {
		t.Fatalf("manifest.json = %+v, want one image tagged svc:%s", manifest, testVersion)
	}
	var config struct {
		OS, Architecture string
		Config           struct {
			Entrypoint, Cmd, Env []string
			User                 string
			Labels               map[string]string
		}
		RootFS struct {
			DiffIDs []string `json:"diff_ids"`
		}
	}
	if err := json.Unmarshal(files[manifest[0].Config], &config); err != nil {
		t.Fatalf("config %s: %v", manifest[0].Config, err)
	}
	c := config.Config
	if config.OS != "linux" || strings.Join(c.Entrypoint, " ") != "/usr/local/bin/svc" || c.User != "65532" {
		t.Errorf("os %q, entrypoint %q, user %q; want linux, [/usr/local/bin/svc], 65532", config.OS, c.Entrypoint, c.User)
	}
	for label, want := range map[string]string{LabelVersion: testVersion, LabelRevision: "0123456789abcdef",
		LabelSource: "https://github.com/svcdev/svc", LabelCreated: "2026-11-25T12:00:00Z"} {
		if c.Labels[label] != want {
			t.Errorf("label %s = %q, want %q", label, c.Labels[label], want)
		}
	}
	if len(config.RootFS.DiffIDs) != len(manifest[0].Layers) {
		t.Fatalf("%d diff ids for %d layers", len(config.RootFS.DiffIDs), len(manifest[0].Layers))
	}

	// Unpack the layers in order into a root folder, checking each against its diff id as a runtime does.
	root := t.TempDir()
	owners := map[string]int{}
	for i, name := range manifest[0].Layers {
		zr, err := gzip.NewReader(bytes.NewReader(files[name]))
		if err != nil {
			t.Fatalf("layer %s: %v", name, err)
		}
		raw, err := io.ReadAll(zr)
		if err != nil {
			t.Fatalf("layer %s: %v", name, err)
		}
		if sum := sha256.Sum256(raw); "sha256:"+hex.EncodeToString(sum[:]) != config.RootFS.DiffIDs[i] {
			t.Fatalf("layer %s does not match diff id %s", name, config.RootFS.DiffIDs[i])
		}
		tr := tar.NewReader(bytes.NewReader(raw))
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(root, filepath.FromSlash(h.Name))
			if !strings.HasPrefix(p, root+string(filepath.Separator)) {
				t.Fatalf("layer entry %q leaves the root", h.Name)
			}
			owners[strings.TrimSuffix(h.Name, "/")] = h.Uid
			switch h.Typeflag {
			case tar.TypeDir:
				if err := os.MkdirAll(p, 0o755); err != nil {
					t.Fatal(err)
				}
			case tar.TypeReg:
				b, err := io.ReadAll(tr)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, b, os.FileMode(h.Mode)&0o777); err != nil {
					t.Fatal(err)
				}
			default:
				t.Fatalf("layer entry %q of type %c: the image holds only folders and files", h.Name, h.Typeflag)
			}
		}
	}

	passwd, _ := os.ReadFile(filepath.Join(root, "etc", "passwd"))
	if !strings.Contains(string(passwd), "\nnonroot:x:65532:65532:") {
		t.Errorf("/etc/passwd has no nonroot user 65532:\n%s", passwd)
	}
	certs, _ := os.ReadFile(filepath.Join(root, filepath.FromSlash(CACertsPath)))
	want, _ := os.ReadFile(CACertsPath)
	if len(certs) == 0 || !bytes.Equal(certs, want) {
		t.Errorf("%s in the image: %d bytes, want the build machine's %d", CACertsPath, len(certs), len(want))
	}
	for _, d := range []string{"home/nonroot", "var/lib/svc"} {
		if owners[d] != 65532 {
			t.Errorf("/%s belongs to uid %d, want 65532 (the user writes there)", d, owners[d])
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	got, err := exec.CommandContext(ctx, filepath.Join(root, filepath.FromSlash(c.Entrypoint[0])), "--version").Output()
	if err != nil || string(got) != "svc "+testVersion+"\n" {
		t.Fatalf("the unpacked entrypoint --version: %q (%v), want %q", got, err, "svc "+testVersion+"\n")
	}

	// containers/image (what `podman load` and skopeo use) reads it too, when it is installed.
	if _, err := exec.LookPath("skopeo"); err == nil {
		out, err := exec.CommandContext(ctx, "skopeo", "inspect", "docker-archive:"+out).Output()
		if err != nil {
			t.Fatalf("skopeo inspect: %v", err)
		}
		var seen struct{ Labels map[string]string }
		if err := json.Unmarshal(out, &seen); err != nil || seen.Labels[LabelVersion] != testVersion {
			t.Errorf("skopeo inspect: labels %v (%v), want version %s", seen.Labels, err, testVersion)
		}
	}
}

// The same inputs give the same image, digest for digest, so that a rebuild of one commit pushes
// nothing new.
func TestImageIsReproducible(t *testing.T) {
	certs := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(certs, []byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var digests []string
	for range 2 {
		img, err := Build(Options{Binary: svcBin, CACerts: certs, Version: "v1"})
		if err != nil {
			t.Fatal(err)
		}
		d, err := img.Digest()
		if err != nil {
			t.Fatal(err)
		}
		digests = append(digests, d.String())
	}
	if digests[0] != digests[1] {
		t.Errorf("two builds of the same inputs: %s and %s", digests[0], digests[1])
	}
}

// An empty base runs only static Linux executables: anything else is refused with the way out.
func TestImageRefusesWhatCannotRun(t *testing.T) {
	dir := t.TempDir()
	text := filepath.Join(dir, "svc.sh")
	if err := os.WriteFile(text, []byte("#!/bin/sh\necho svc\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cases := map[string]string{text: "GOOS=linux", filepath.Join(dir, "missing"): "no such file"}
	if dynamic, err := exec.LookPath("ls"); err == nil && isDynamic(dynamic) {
		cases[dynamic] = "CGO_ENABLED=0"
	}
	for bin, want := range cases {
		if _, err := Build(Options{Binary: bin}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Build(%s): %v, want an error saying %q", bin, err, want)
		}
	}
	noCerts := filepath.Join(dir, "empty.crt")
	if err := os.WriteFile(noCerts, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Build(Options{Binary: svcBin, CACerts: noCerts}); err == nil || !strings.Contains(err.Error(), "no PEM certificate") {
		t.Errorf("Build with an empty CA bundle: %v", err)
	}
}

// isDynamic says whether an executable asks for a dynamic loader (ls is, on Debian).
func isDynamic(p string) bool {
	f, err := elf.Open(p)
	if err != nil {
		return false
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return true
		}
	}
	return false
}

// The Dockerfile gives the same image as Build: its last stage is read instruction by instruction and
// compared with what Build puts in the config (the Dockerfile cannot be built here: no Docker engine).
func TestDockerfileSaysTheSame(t *testing.T) {
	raw, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	// Join continued lines, drop comments, keep the instructions after the last FROM.
	text := strings.ReplaceAll(string(raw), "\\\n", " ")
	var stage []string
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.HasPrefix(line, "FROM ") {
			stage = nil
		}
		stage = append(stage, line)
	}
	got := map[string][]string{}
	for _, line := range stage {
		word, rest, _ := strings.Cut(line, " ")
		got[word] = append(got[word], strings.TrimSpace(rest))
	}
	jsonArray := func(v []string) string { b, _ := json.Marshal(v); return string(b) }
	for word, want := range map[string]string{
		"FROM": "scratch", "USER": User, "WORKDIR": Home, "EXPOSE": Port, "VOLUME": DataDir,
		"ENTRYPOINT": jsonArray([]string{Entrypoint}), "CMD": jsonArray(cmd), "ENV": strings.Join(env, " "),
	} {
		if len(got[word]) != 1 || got[word][0] != want {
			t.Errorf("Dockerfile's last stage: %s %q, want %s %s", word, got[word], word, want)
		}
	}
	labels := strings.Join(got["LABEL"], " ")
	for _, l := range []string{LabelTitle, LabelVersion, LabelRevision, LabelSource} {
		if !strings.Contains(labels, l+"=") {
			t.Errorf("Dockerfile sets no label %s", l)
		}
	}
	for _, want := range []string{Entrypoint, CACertsPath, "/etc/passwd", "nonroot:x:65532:65532:nonroot:" + Home, "CGO_ENABLED=0", "--chown=65532:65532"} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("Dockerfile never mentions %q", want)
		}
	}
}
