// Package image builds svc's OCI image without a Docker daemon (go-containerregistry): an empty base,
// one layer with CA certificates and a non-root user, one with the static svc binary (docs/DEPLOY.md,
// "The image").
package image

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// What every svc image has; the Dockerfile in the repository root gives the same.
const (
	Entrypoint = "/usr/local/bin/svc"
	// User is distroless's "nonroot" (65532): no shell, no home of any use, not root.
	User    = "65532"
	uid     = 65532
	Home    = "/home/nonroot"
	DataDir = "/var/lib/svc"
	// CACertsPath is where Go's crypto/x509 looks first on Linux, and where the image puts the bundle.
	CACertsPath = "/etc/ssl/certs/ca-certificates.crt"
	Port        = "8080"
)

// Labels of the image (OCI annotations' names, which docker and podman show as labels).
const (
	LabelVersion  = "org.opencontainers.image.version"
	LabelSource   = "org.opencontainers.image.source"
	LabelRevision = "org.opencontainers.image.revision"
	LabelTitle    = "org.opencontainers.image.title"
	LabelCreated  = "org.opencontainers.image.created"
)

// Options say what goes into an image.
type Options struct {
	Binary   string    // a static svc binary built for Linux (CGO_ENABLED=0), e.g. bin/svc
	CACerts  string    // a PEM bundle; default the build machine's /etc/ssl/certs/ca-certificates.crt
	Version  string    // `git describe --always --dirty`
	Revision string    // the full commit id
	Source   string    // the repository's URL
	Created  time.Time // the image's creation time; zero gives the Unix epoch, so that a build is reproducible
}

// Build assembles the image. The binary must be a static Linux executable: an empty base has no
// dynamic loader nor libc to run anything else.
func Build(o Options) (v1.Image, error) {
	if o.CACerts == "" {
		o.CACerts = CACertsPath
	}
	if o.Created.IsZero() {
		o.Created = time.Unix(0, 0)
	}
	o.Created = o.Created.UTC()
	bin, err := os.ReadFile(o.Binary)
	if err != nil {
		return nil, fmt.Errorf("image: the binary: %w", err)
	}
	arch, err := staticLinuxArch(bin)
	if err != nil {
		return nil, fmt.Errorf("image: %s: %w", o.Binary, err)
	}
	certs, err := os.ReadFile(o.CACerts)
	if err != nil {
		return nil, fmt.Errorf("image: the CA certificates (install Debian's ca-certificates, or give another bundle): %w", err)
	}
	if !bytes.Contains(certs, []byte("-----BEGIN CERTIFICATE-----")) {
		return nil, fmt.Errorf("image: %s holds no PEM certificate", o.CACerts)
	}

	base, err := layer(o.Created, []entry{
		dir("etc", 0, 0o755), file("etc/passwd", 0, 0o644, []byte(passwd)), file("etc/group", 0, 0o644, []byte(group)),
		dir("etc/ssl", 0, 0o755), dir("etc/ssl/certs", 0, 0o755), file(CACertsPath[1:], 0, 0o644, certs),
		dir("home", 0, 0o755), dir(Home[1:], uid, 0o700),
		dir("tmp", 0, 0o1777),
		dir("var", 0, 0o755), dir("var/lib", 0, 0o755), dir(DataDir[1:], uid, 0o700),
	})
	if err != nil {
		return nil, err
	}
	app, err := layer(o.Created, []entry{
		dir("usr", 0, 0o755), dir("usr/local", 0, 0o755), dir("usr/local/bin", 0, 0o755), file(Entrypoint[1:], 0, 0o755, bin),
	})
	if err != nil {
		return nil, err
	}
	img, err := mutate.Append(mutate.MediaType(empty.Image, types.OCIManifestSchema1),
		mutate.Addendum{Layer: base, History: v1.History{Created: v1.Time{Time: o.Created}, CreatedBy: "svcimage: CA certificates, user nonroot (65532)"}},
		mutate.Addendum{Layer: app, History: v1.History{Created: v1.Time{Time: o.Created}, CreatedBy: "svcimage: " + Entrypoint}},
	)
	if err != nil {
		return nil, fmt.Errorf("image: %w", err)
	}
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("image: %w", err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Created = "linux", arch, v1.Time{Time: o.Created}
	cf.Config = v1.Config{
		Entrypoint:   []string{Entrypoint},
		Cmd:          cmd,
		User:         User,
		WorkingDir:   Home,
		Env:          env,
		ExposedPorts: map[string]struct{}{Port + "/tcp": {}},
		Volumes:      map[string]struct{}{DataDir: {}},
		Labels: map[string]string{
			LabelTitle: "svc", LabelVersion: o.Version, LabelSource: o.Source, LabelRevision: o.Revision,
			LabelCreated: o.Created.Format(time.RFC3339),
		},
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("image: %w", err)
	}
	return img, nil
}

// WriteTarball writes img, tagged tag (e.g. "svc:v1.2.0"), as the tarball `docker load` and `podman
// load` read (and `crane push` pushes).
func WriteTarball(file, tag string, img v1.Image) error {
	ref, err := name.NewTag(tag)
	if err != nil {
		return fmt.Errorf("image: tag %q: %w", tag, err)
	}
	if err := tarball.WriteToFile(file, ref, img); err != nil {
		return fmt.Errorf("image: write %s: %w", file, err)
	}
	return nil
}

var (
	cmd = []string{"server"}
	// In a container loopback reaches nothing: listen on every interface; keep the data where a volume
	// is mounted (docs/DEPLOY.md).
	env = []string{"PATH=/usr/local/bin", "HOME=" + Home, "SVC_ADDR=0.0.0.0:" + Port, "SVC_DATA=" + DataDir}
)

const (
	passwd = "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"
	group  = "root:x:0:\nnonroot:x:65532:\n"
)

// staticLinuxArch is the GOARCH of a Linux ELF executable that needs no dynamic loader.
func staticLinuxArch(bin []byte) (string, error) {
	f, err := elf.NewFile(bytes.NewReader(bin))
	if err != nil {
		return "", fmt.Errorf("not a Linux executable (build it with GOOS=linux): %w", err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return "", errors.New("dynamically linked: build it with CGO_ENABLED=0, as `make build` does")
		}
	}
	switch f.Machine {
	case elf.EM_X86_64:
		return "amd64", nil
	case elf.EM_AARCH64:
		return "arm64", nil
	}
	return "", fmt.Errorf("an architecture the image does not name (%v)", f.Machine)
}

// entry is one file or folder of a layer.
type entry struct {
	hdr  tar.Header
	body []byte
}

func dir(p string, owner int, mode int64) entry {
	return entry{hdr: tar.Header{Typeflag: tar.TypeDir, Name: p + "/", Mode: mode, Uid: owner, Gid: owner}}
}

func file(p string, owner int, mode int64, body []byte) entry {
	return entry{hdr: tar.Header{Typeflag: tar.TypeReg, Name: path.Clean(p), Mode: mode, Uid: owner, Gid: owner, Size: int64(len(body))}, body: body}
}

// layer is a gzip-compressed OCI layer of entries, every one dated at (so the same inputs give the same
// digest).
func layer(at time.Time, entries []entry) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := e.hdr
		h.ModTime = at
		if err := tw.WriteHeader(&h); err != nil {
			return nil, fmt.Errorf("image: layer: %w", err)
		}
		if _, err := tw.Write(e.body); err != nil {
			return nil, fmt.Errorf("image: layer: %w", err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("image: layer: %w", err)
	}
	raw := buf.Bytes()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(raw)), nil },
		tarball.WithMediaType(types.OCILayer), tarball.WithCompressedCaching)
	if err != nil {
		return nil, fmt.Errorf("image: layer: %w", err)
	}
	return l, nil
}
