package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6/tf6server"
)

// generateConfig runs `terraform query -generate-config-out=generated.tf`
// in dir, which holds a configuration and a query file, and returns the
// generated configuration: terraform-plugin-testing's query mode does not
// generate configuration.
func generateConfig(t *testing.T, dir string) (string, error) {
	t.Helper()
	if _, err := runTerraform(t, dir, "query", "-generate-config-out=generated.tf"); err != nil {
		return "", err
	}
	generated, err := os.ReadFile(filepath.Join(dir, "generated.tf"))
	return string(generated), err
}

// runTerraform runs terraform init, then terraform args, in dir with the
// Terraform the tests use (TF_ACC_TERRAFORM_PATH) and this provider served
// in-process as terraform-plugin-testing serves it to its steps, for what
// its steps cannot do. It returns the output of args.
func runTerraform(t *testing.T, dir string, args ...string) (string, error) {
	t.Helper()
	tf := os.Getenv("TF_ACC_TERRAFORM_PATH")
	env := append(os.Environ(), "TF_REATTACH_PROVIDERS="+serveTestProviders(t), "TF_IN_AUTOMATION=1")
	var out bytes.Buffer
	for _, a := range [][]string{{"init", "-input=false"}, append(args, "-no-color")} {
		out.Reset()
		cmd := exec.Command(tf, a...)
		cmd.Dir, cmd.Env = dir, env
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			return out.String(), fmt.Errorf("terraform %v: %w\n%s", a, err, out.String())
		}
	}
	return out.String(), nil
}

// serveTestProviders serves testProviders until the test ends and returns
// their TF_REATTACH_PROVIDERS.
func serveTestProviders(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var stopped []chan struct{}
	t.Cleanup(func() {
		cancel()
		for _, c := range stopped {
			<-c
		}
	})
	reattach := map[string]any{}
	for name, factory := range testProviders {
		server, err := factory()
		if err != nil {
			t.Fatal(err)
		}
		address := "registry.terraform.io/hashicorp/" + name
		config, closed := make(chan *plugin.ReattachConfig), make(chan struct{})
		stopped = append(stopped, closed)
		go func() {
			err := tf6server.Serve(address, func() tfprotov6.ProviderServer { return server },
				tf6server.WithDebug(ctx, config, closed), tf6server.WithGoPluginLogger(hclog.NewNullLogger()), tf6server.WithLoggingSink(t))
			if err != nil {
				t.Errorf("serving %s: %v", address, err)
			}
		}()
		var c *plugin.ReattachConfig
		select {
		case c = <-config:
		case <-closed:
			t.Fatalf("%s stopped before it served", address)
		}
		reattach[address] = map[string]any{
			"Protocol": c.Protocol, "ProtocolVersion": c.ProtocolVersion, "Pid": c.Pid, "Test": c.Test,
			"Addr": map[string]string{"Network": c.Addr.Network(), "String": c.Addr.String()},
		}
	}
	b, _ := json.Marshal(reattach) // plain data
	return string(b)
}
