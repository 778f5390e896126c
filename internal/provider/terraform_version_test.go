package provider

import (
	"context"
	"fmt"
	"os"

	"github.com/hashicorp/go-version"
	"github.com/hashicorp/terraform-plugin-testing/tfversion"
)

// terraformAtLeast gates a test on features of Terraform min (identity:
// 1.12, list resources and actions: 1.14). Elsewhere an older Terraform
// skips the test, as tfversion.SkipBelow does; in CI (CI set, as .ci/run
// does) it fails it: make test runs these tests under terraform-1.15
// (TF115_TESTS in GNUmakefile), where none may be skipped.
func terraformAtLeast(min *version.Version) []tfversion.TerraformVersionCheck {
	if os.Getenv("CI") == "" {
		return []tfversion.TerraformVersionCheck{tfversion.SkipBelow(min)}
	}
	return []tfversion.TerraformVersionCheck{requireTerraform{min}}
}

type requireTerraform struct{ min *version.Version }

func (r requireTerraform) CheckTerraformVersion(_ context.Context, req tfversion.CheckTerraformVersionRequest, resp *tfversion.CheckTerraformVersionResponse) {
	if req.TerraformVersion.Core().LessThan(r.min) {
		resp.Error = fmt.Errorf("this test needs Terraform >= %s and TF_ACC_TERRAFORM_PATH runs %s: CI must run it under terraform-1.15 (make test does, from ../shared/tools)", r.min, req.TerraformVersion)
	}
}
