package core

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/svcdev/svc/internal/edgemodel"
)

// Local artifacts (file:// URIs and plain paths) may only name files inside the artifacts folder
// (--artifacts-dir). Without that, registering a job with finalAdapter "/etc/shadow" and deploying it
// would tell any caller which files exist on the server. Remote schemes are taken as recorded.

// localArtifact returns the path of a local artifact relative to the artifacts folder. ok is false for
// remote artifacts; err is set for a local one that is outside the folder or climbs with "..".
func (s *Service) localArtifact(uri string) (rel string, local bool, err error) {
	path, isFile := strings.CutPrefix(uri, "file://")
	if !isFile && strings.Contains(uri, "://") {
		return "", false, nil
	}
	outside := errorf(edgemodel.CodeInvalidRequest, "local artifact %q must be a file inside the server's artifacts folder (--artifacts-dir), given as a path relative to it or an absolute path under it, without \"..\"", uri)
	if s.artifactsDir == "" || path == "" || strings.ContainsRune(path, 0) {
		return "", true, outside
	}
	for _, seg := range strings.FieldsFunc(path, func(r rune) bool { return r == '/' || r == filepath.Separator }) {
		if seg == ".." {
			return "", true, outside
		}
	}
	if isFile && !filepath.IsAbs(path) {
		return "", true, outside // file://relative is not a file URI
	}
	if filepath.IsAbs(path) {
		r, err := filepath.Rel(s.artifactsDir, filepath.Clean(path))
		if err != nil || r == "." || r == ".." || strings.HasPrefix(r, ".."+string(filepath.Separator)) {
			return "", true, outside
		}
		path = r
	}
	return filepath.Clean(path), true, nil
}

// artifactAllowed checks where a local artifact is, without looking at the disk, so that job
// registration reveals nothing about which files exist.
func (s *Service) artifactAllowed(uri string) error {
	_, _, err := s.localArtifact(uri)
	return err
}

// artifactServable checks that a target's artifact can be served: a local one must be a file inside
// the artifacts folder. Outside the folder, ".." and missing are one and the same answer. The lookup
// goes through os.Root, so a symbolic link inside the folder cannot lead out of it either.
func (s *Service) artifactServable(uri string) error {
	rel, local, err := s.localArtifact(uri)
	if !local {
		return nil
	}
	missing := errorf(edgemodel.CodeInvalidTarget, "adapter artifact %q was not found in the server's artifacts folder", uri)
	if err != nil {
		return missing
	}
	root, err := os.OpenRoot(s.artifactsDir)
	if err != nil {
		return missing
	}
	defer root.Close()
	if _, err := root.Stat(rel); err != nil {
		return missing
	}
	return nil
}
