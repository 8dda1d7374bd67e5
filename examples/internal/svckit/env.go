package svckit

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// MaxSecretFile bounds what a *_FILE variable's file may hold: a DSN, a
// URL or a key is short, and a wrong path (a log, a device) must not fill
// memory.
const MaxSecretFile = 64 << 10

// LookupEnv returns a setting from the environment: the variable name's
// value, else the content of the file that fileVar (if not "") names,
// trimmed of trailing newlines (a mounted Kubernetes or Docker secret),
// else "". Errors name the variable and the path, never the content.
func LookupEnv(name, fileVar string) (string, error) {
	if v := os.Getenv(name); v != "" {
		return v, nil
	}
	if fileVar == "" {
		return "", nil
	}
	path := os.Getenv(fileVar)
	if path == "" {
		return "", nil
	}
	v, err := ReadSecretFile(path)
	if err != nil {
		return "", fmt.Errorf("config: %s=%s: %w", fileVar, path, err)
	}
	return v, nil
}

// ReadSecretFile reads a secret from path, trimmed of trailing newlines.
// Its errors hold neither the content nor the path (the caller names it).
func ReadSecretFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", pathless(err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxSecretFile+1))
	switch {
	case err != nil:
		return "", pathless(err)
	case len(data) > MaxSecretFile:
		return "", fmt.Errorf("larger than %d bytes: not a secret file", MaxSecretFile)
	}
	v := strings.TrimRight(string(data), "\r\n")
	if v == "" {
		return "", errors.New("the file is empty")
	}
	return v, nil
}

// pathless drops the path from an *os.PathError, which the caller names.
func pathless(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("cannot %s: %w", pe.Op, pe.Err)
	}
	return err
}

// EnvVar names a variable that overrides a config key: Var, and FileVar
// (when not "") naming a file that holds the value (a mounted secret).
type EnvVar struct {
	Var, FileVar string
	// Key is the setting's key in the config file, e.g. "mysql.dsn".
	Key string
}

// EnvSetting is one setting of a config C that the environment can give.
type EnvSetting[C any] struct {
	EnvVar
	// Set stores the value in the config; its error (a value that does
	// not parse) must not hold the value when it may be a secret.
	Set func(c *C, v string) error
}

// Env is a setting whose value is stored as it is.
func Env[C any](v EnvVar, set func(c *C, v string)) EnvSetting[C] {
	return EnvSetting[C]{EnvVar: v, Set: func(c *C, s string) error { set(c, s); return nil }}
}

// EnvVars are the variables of settings, for Command.Env.
func EnvVars[C any](settings []EnvSetting[C]) []EnvVar {
	vars := make([]EnvVar, len(settings))
	for i, s := range settings {
		vars[i] = s.EnvVar
	}
	return vars
}

// ApplyEnv overrides c with every setting the environment gives (plain
// variable, else the file its *_FILE variable names). Errors name the
// variable, and the path of a file, never a secret's value.
func ApplyEnv[C any](c *C, settings []EnvSetting[C]) error {
	var errs []error
	for _, s := range settings {
		v, err := LookupEnv(s.Var, s.FileVar)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if v == "" {
			continue
		}
		if err := s.Set(c, v); err != nil {
			errs = append(errs, fmt.Errorf("config: %s: %w", s.Var, err))
		}
	}
	return errors.Join(errs...)
}
