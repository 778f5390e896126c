// Command policycheck checks the documented IAM policies (the IAM guide's
// and examples/complete's) against the AWS calls the acceptance suites
// recorded (make test runs it last): it prints the report, writes it to
// summary.txt in the records' directory, and exits 1 when a documented
// policy lacks a call its role makes.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/awsrecord"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/iamcheck"
)

func main() {
	records := flag.String("records", os.Getenv(awsrecord.EnvDir), "directory of the recorded calls")
	root := flag.String("root", ".", "the repository, whose IAM guide ("+iamcheck.Guide+") and examples/complete are checked")
	flag.Parse()
	if err := run(*records, *root); err != nil {
		fmt.Fprintln(os.Stderr, "policycheck:", err)
		os.Exit(1)
	}
}

func run(records, root string) error {
	if records == "" {
		return fmt.Errorf("no records: set -records or %s", awsrecord.EnvDir)
	}
	calls, err := awsrecord.Read(records)
	if err != nil {
		return err
	}
	policies, err := iamcheck.Documents(root)
	if err != nil {
		return err
	}
	report, err := iamcheck.Check(policies, calls)
	if err != nil {
		return err
	}
	summary := filepath.Join(records, "summary.txt")
	if err := os.WriteFile(summary, []byte(report.String()), 0o644); err != nil {
		return err
	}
	fmt.Print(report)
	if !report.OK() {
		return fmt.Errorf("the documented policies do not match the calls the code makes (%s)", summary)
	}
	return nil
}
