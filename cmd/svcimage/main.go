// Command svcimage writes svc's OCI image as a tarball that `docker load`, `podman load` and `crane
// push` read, without a Docker daemon (`make image`; docs/DEPLOY.md, "The image").
package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/svcdev/svc/internal/image"
)

func main() {
	var o image.Options
	flag.StringVar(&o.Binary, "binary", "bin/svc", "the static Linux svc binary (make build)")
	flag.StringVar(&o.CACerts, "ca-certs", image.CACertsPath, "PEM bundle of CA certificates to put in the image")
	flag.StringVar(&o.Version, "version", "", "org.opencontainers.image.version label (git describe --always --dirty)")
	flag.StringVar(&o.Revision, "revision", "", "org.opencontainers.image.revision label (the commit id)")
	flag.StringVar(&o.Source, "source", "", "org.opencontainers.image.source label (the repository URL)")
	created := flag.String("created", "", "creation time, RFC 3339 (make image gives the commit's time; empty: the Unix epoch)")
	out := flag.String("out", "bin/svc-image.tar", "the tarball to write")
	tag := flag.String("tag", "", "the image's name and tag in the tarball (default svc:<version>)")
	flag.Parse()
	if flag.NArg() > 0 {
		fail(fmt.Errorf("unexpected argument %q", flag.Arg(0)))
	}
	if *created != "" {
		t, err := time.Parse(time.RFC3339, *created)
		if err != nil {
			fail(fmt.Errorf("--created: %w", err))
		}
		o.Created = t
	}
	if *tag == "" {
		v := o.Version
		if v == "" {
			v = "latest"
		}
		*tag = "svc:" + v
	}
	img, err := image.Build(o)
	if err != nil {
		fail(err)
	}
	if err := image.WriteTarball(*out, *tag, img); err != nil {
		fail(err)
	}
	d, _ := img.Digest()
	fmt.Printf("wrote %s: %s (%s)\n", *out, *tag, d)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "svcimage:", err)
	os.Exit(1)
}
