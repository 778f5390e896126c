// Package tfcli finds the Terraform CLI that tests run themselves:
// TF_ACC_TERRAFORM_PATH when set (the one terraform-plugin-testing runs),
// else terraform on PATH. Nothing is downloaded.
package tfcli

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Path is the absolute path of the tests' Terraform.
func Path() (string, error) {
	name := "terraform"
	if p := os.Getenv("TF_ACC_TERRAFORM_PATH"); p != "" {
		name = p
	}
	path, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("terraform is needed: put it on PATH or set TF_ACC_TERRAFORM_PATH (%w)", err)
	}
	return filepath.Abs(path)
}

// Must is Path, failing t when there is no Terraform.
func Must(t testing.TB) string {
	t.Helper()
	path, err := Path()
	if err != nil {
		t.Fatal(err)
	}
	return path
}
