package main

import (
	"fmt"
	"runtime/debug"
)

// buildInfo is what outboxctl version prints. The VCS fields are empty
// when the binary was built without VCS stamping (-buildvcs=false, or
// outside a repository).
type buildInfo struct {
	Module  string `json:"module"`
	Version string `json:"version"`
	// Library is the version of the library module
	// (github.com/outboxrelay/outboxrelay) the binary holds: "(devel)"
	// when built from a checkout.
	Library     string `json:"library"`
	GoVersion   string `json:"go_version"`
	VCS         string `json:"vcs,omitempty"`
	VCSRevision string `json:"vcs_revision,omitempty"`
	VCSTime     string `json:"vcs_time,omitempty"`
	VCSModified bool   `json:"vcs_modified"`
}

// readBuildInfo reads the binary's build information.
func readBuildInfo() (buildInfo, bool) {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return buildInfo{}, false
	}
	info := buildInfo{Module: bi.Main.Path, Version: bi.Main.Version, GoVersion: bi.GoVersion, Library: libraryVersion(bi)}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs":
			info.VCS = s.Value
		case "vcs.revision":
			info.VCSRevision = s.Value
		case "vcs.time":
			info.VCSTime = s.Value
		case "vcs.modified":
			info.VCSModified = s.Value == "true"
		}
	}
	return info, true
}

// libraryModule is the library's module path; outboxctl is a module of
// its own beside it.
const libraryModule = "github.com/outboxrelay/outboxrelay"

// libraryVersion is the version of libraryModule in bi.
func libraryVersion(bi *debug.BuildInfo) string {
	for _, d := range bi.Deps {
		if d.Path != libraryModule {
			continue
		}
		if d.Replace != nil {
			d = d.Replace
		}
		if d.Version == "" {
			return "(devel)"
		}
		return d.Version
	}
	return "(unknown)"
}

func runVersion(c *cli, args []string) int {
	fs := c.baseFlags("[--json]")
	if code, ok := c.parseNoArgs(fs, args, nil); !ok {
		return code
	}
	info, ok := readBuildInfo()
	if !ok {
		return c.errorf(exitFailed, "no build information in this binary")
	}
	if c.json {
		return c.printJSON(info)
	}
	fmt.Fprintf(c.out, "outboxctl %s\nmodule %s\nlibrary %s %s\n%s\n", info.Version, info.Module, libraryModule, info.Library, info.GoVersion)
	if info.VCSRevision != "" {
		modified := ""
		if info.VCSModified {
			modified = " (modified)"
		}
		fmt.Fprintf(c.out, "%s revision %s%s, %s\n", info.VCS, info.VCSRevision, modified, info.VCSTime)
	}
	return exitOK
}
