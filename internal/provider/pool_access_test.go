package provider

import (
	"context"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-timetypes/timetypes"
	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

// TestPoolAccessValidation: each refusal of the access policy at plan time
// names the attribute and what is allowed, once; parts not known yet are
// not refused.
func TestPoolAccessValidation(t *testing.T) {
	server, poolType := poolResourceServer(t)
	accessType := poolType.AttributeTypes["access"].(tftypes.List)
	entryType := accessType.ElementType.(tftypes.Object)
	str := func(s string) tftypes.Value { return tftypes.NewValue(tftypes.String, s) }
	unknownString := tftypes.NewValue(tftypes.String, tftypes.UnknownValue)
	strs := func(ss ...string) tftypes.Value {
		elems := make([]tftypes.Value, len(ss))
		for i, s := range ss {
			elems[i] = str(s)
		}
		return tftypes.NewValue(tftypes.List{ElementType: tftypes.String}, elems)
	}
	entry := func(repository string, attrs map[string]tftypes.Value) tftypes.Value {
		if attrs == nil {
			attrs = map[string]tftypes.Value{}
		}
		if _, set := attrs["repository"]; !set {
			attrs["repository"] = str(repository)
		}
		return objectValue(entryType, attrs)
	}
	access := func(entries ...tftypes.Value) tftypes.Value { return tftypes.NewValue(accessType, entries) }
	twoClasses := func() tftypes.Value {
		classType := poolType.AttributeTypes["resource_classes"].(tftypes.Map)
		class := func(cpu, memory int64) tftypes.Value {
			return objectValue(classType.ElementType.(tftypes.Object), map[string]tftypes.Value{
				"cpu": tftypes.NewValue(tftypes.Number, cpu), "memory_mib": tftypes.NewValue(tftypes.Number, memory)})
		}
		return tftypes.NewValue(classType, map[string]tftypes.Value{"large": class(2, 4096), "xlarge": class(4, 8192)})
	}
	for name, tc := range map[string]struct {
		pool map[string]tftypes.Value // besides name
		want string                   // the one error's detail, in part; "" means valid
	}{
		"every cap": {pool: map[string]tftypes.Value{"max_runtime": str("4h"), "access": access(
			entry("octo/app", map[string]tftypes.Value{
				"workflows":   strs("octo/app/.github/workflows/ci.yml@refs/heads/main", "octo/app/.github/workflows/release-*"),
				"max_runners": tftypes.NewValue(tftypes.Number, 1000), "max_runtime": str("240m"), "resource_classes": strs("large", "2xlarge"),
			}),
			entry("octo/docs", nil),
		)}},
		"no policy":      {pool: map[string]tftypes.Value{"access": tftypes.NewValue(accessType, nil)}},
		"unknown policy": {pool: map[string]tftypes.Value{"access": tftypes.NewValue(accessType, tftypes.UnknownValue)}},
		"unknown repository": {pool: map[string]tftypes.Value{"access": access(
			entry("", map[string]tftypes.Value{"repository": unknownString, "workflows": strs("octo/other/*")}),
			entry("octo/app", map[string]tftypes.Value{"workflows": tftypes.NewValue(tftypes.List{ElementType: tftypes.String}, []tftypes.Value{unknownString})}),
		)}},
		"unknown classes and max runtime": {pool: map[string]tftypes.Value{
			"resource_classes": tftypes.NewValue(poolType.AttributeTypes["resource_classes"], tftypes.UnknownValue),
			"max_runtime":      unknownString,
			"access":           access(entry("octo/app", map[string]tftypes.Value{"max_runtime": str("100h"), "resource_classes": strs("huge")})),
		}},
		"empty policy": {pool: map[string]tftypes.Value{"access": access()},
			want: "Attribute access list must contain at least 1 elements, got: 0"},
		"repository without owner": {pool: map[string]tftypes.Value{"access": access(entry("app", nil))},
			want: `Attribute access[0].repository: repository "app" must be a GitHub repository's full name, owner/name: the owner 1-39 letters, digits or '-', not starting with '-', the name 1-100 letters, digits, '_', '.' or '-'.`},
		"repository twice": {pool: map[string]tftypes.Value{"access": access(entry("octo/app", nil), entry("octo/docs", nil), entry("Octo/App", nil))},
			want: `Attribute access[2].repository: repository "Octo/App" is also access[0].repository ("octo/app"): GitHub compares repository names ignoring case, and each repository has one entry.`},
		"another repository's workflow": {pool: map[string]tftypes.Value{"access": access(entry("octo/app", map[string]tftypes.Value{
			"workflows": strs("octo/app/.github/workflows/ci.yml@refs/heads/main", "octo/app-admin/.github/workflows/*"),
		}))},
			want: `Attribute access[0].workflows[1]: workflow "octo/app-admin/.github/workflows/*" must start with "octo/app/", its entry's repository and '/', followed by the workflow's path and ref ` +
				`(such as "octo/app/.github/workflows/ci.yml@refs/heads/main" or "octo/app/.github/workflows/*"): a workflow_ref starts with its own repository, so an entry admits no other repository's workflows.`},
		"workflow glob over repositories": {pool: map[string]tftypes.Value{"access": access(entry("octo/app", map[string]tftypes.Value{"workflows": strs("*/.github/workflows/*")}))},
			want: `Attribute access[0].workflows[0]: workflow "*/.github/workflows/*" must start with "octo/app/"`},
		"no workflows": {pool: map[string]tftypes.Value{"access": access(entry("octo/app", map[string]tftypes.Value{"workflows": strs()}))},
			want: "Attribute access[0].workflows list must contain at least 1 elements, got: 0"},
		"workflow twice": {pool: map[string]tftypes.Value{"access": access(entry("octo/app", map[string]tftypes.Value{"workflows": strs("octo/app/*", "octo/app/*")}))},
			want: `Attribute access[0].workflows lists "octo/app/*" more than once; each value may appear only once.`},
		"no runners": {pool: map[string]tftypes.Value{"access": access(entry("octo/app", map[string]tftypes.Value{"max_runners": tftypes.NewValue(tftypes.Number, 0)}))},
			want: "Attribute access[0].max_runners value must be between 1 and 1000, got: 0"},
		"too many runners": {pool: map[string]tftypes.Value{"access": access(entry("octo/app", map[string]tftypes.Value{"max_runners": tftypes.NewValue(tftypes.Number, 1001)}))},
			want: "Attribute access[0].max_runners value must be between 1 and 1000, got: 1001"},
		"max runtime not a duration": {pool: map[string]tftypes.Value{"access": access(entry("octo/app", map[string]tftypes.Value{"max_runtime": str("2 hours")}))},
			want: "Attribute access[0].max_runtime must be a duration such as `90s`, `7m` or `1h30m`, from 1m to 168h, got \"2 hours\"."},
		"max runtime beyond any pool's": {pool: map[string]tftypes.Value{"access": access(entry("octo/app", map[string]tftypes.Value{"max_runtime": str("200h")}))},
			want: "Attribute access[0].max_runtime must be a duration such as `90s`, `7m` or `1h30m`, from 1m to 168h, got \"200h\"."},
		"max runtime above the pool's": {pool: map[string]tftypes.Value{"max_runtime": str("1h"), "access": access(entry("octo/app", map[string]tftypes.Value{"max_runtime": str("90m")}))},
			want: "Attribute access[0].max_runtime: max runtime 1h30m must be from 1m up to the pool's max runtime, 1h; an entry narrows the pool's max_runtime, never widens it."},
		"max runtime above the pool's default": {pool: map[string]tftypes.Value{"access": access(entry("octo/app", map[string]tftypes.Value{"max_runtime": str("45m")}))},
			want: "Attribute access[0].max_runtime: max runtime 45m must be from 1m up to the pool's max runtime, 30m (its default: the pool sets no max_runtime); an entry narrows the pool's max_runtime, never widens it."},
		"class of another pool": {pool: map[string]tftypes.Value{"resource_classes": twoClasses(), "access": access(entry("octo/app", map[string]tftypes.Value{"resource_classes": strs("large", "2xlarge")}))},
			want: `Attribute access[0].resource_classes[1]: resource class "2xlarge" is not one of the pool's: large, xlarge.`},
		"class not among the defaults": {pool: map[string]tftypes.Value{"access": access(entry("octo/app", map[string]tftypes.Value{"resource_classes": strs("gpu")}))},
			want: `Attribute access[0].resource_classes[0]: resource class "gpu" is not one of the pool's: large, xlarge, 2xlarge, 4xlarge, 8xlarge, 12xlarge, 16xlarge.`},
		"no classes": {pool: map[string]tftypes.Value{"access": access(entry("octo/app", map[string]tftypes.Value{"resource_classes": strs()}))},
			want: "Attribute access[0].resource_classes list must contain at least 1 elements, got: 0"},
		"class twice": {pool: map[string]tftypes.Value{"access": access(entry("octo/app", map[string]tftypes.Value{"resource_classes": strs("large", "large")}))},
			want: `Attribute access[0].resource_classes lists "large" more than once; each value may appear only once.`},
	} {
		t.Run(name, func(t *testing.T) {
			tc.pool["name"] = str("okay")
			config, err := tfprotov6.NewDynamicValue(poolType, objectValue(poolType, tc.pool))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := server.ValidateResourceConfig(context.Background(), &tfprotov6.ValidateResourceConfigRequest{TypeName: "ec2runners_pool", Config: &config})
			if err != nil {
				t.Fatal(err)
			}
			var errs []string
			for _, d := range resp.Diagnostics {
				if d.Severity == tfprotov6.DiagnosticSeverityError {
					errs = append(errs, d.Summary+": "+d.Detail)
				}
			}
			switch {
			case tc.want == "" && len(errs) > 0:
				t.Errorf("refused: %q", errs)
			case tc.want != "" && (len(errs) != 1 || !strings.Contains(errs[0], tc.want)):
				t.Errorf("errors %q, want one containing %q", errs, tc.want)
			}
		})
	}
}

// poolResourceServer is the provider as Terraform talks to it, and the
// type of the pool resource's configuration.
func poolResourceServer(t *testing.T) (tfprotov6.ProviderServer, tftypes.Object) {
	t.Helper()
	server, err := providerserver.NewProtocol6WithError(New("test")())()
	if err != nil {
		t.Fatal(err)
	}
	schemas, err := server.GetProviderSchema(context.Background(), &tfprotov6.GetProviderSchemaRequest{})
	if err != nil {
		t.Fatal(err)
	}
	return server, schemas.ResourceSchemas["ec2runners_pool"].ValueType().(tftypes.Object)
}

// objectValue is an object of typ with the given attributes, the others null.
func objectValue(typ tftypes.Object, attrs map[string]tftypes.Value) tftypes.Value {
	all := map[string]tftypes.Value{}
	for name, attrType := range typ.AttributeTypes {
		all[name] = tftypes.NewValue(attrType, nil)
		if v, ok := attrs[name]; ok {
			all[name] = v
		}
	}
	return tftypes.NewValue(typ, all)
}

// TestPoolAccessValue: the policy reads back in its order, with nulls for
// what it leaves out and the spelling of each max_runtime the prior state
// has for the same duration, so a refresh shows no drift. (The spelling is
// kept by the framework, as in a read, through the semantic equality of
// timetypes.GoDuration: keptSpelling.)
func TestPoolAccessValue(t *testing.T) {
	ctx := context.Background()
	policy := &protocol.Access{Repositories: []protocol.RepositoryAccess{
		{Repository: "octo/web", Workflows: []string{"octo/web/.github/workflows/*"}, MaxRunners: 8, MaxRuntime: protocol.Duration(90 * time.Minute), ResourceClasses: []string{"xlarge", "large"}},
		{Repository: "Octo/App", MaxRuntime: protocol.Duration(2 * time.Hour)},
		{Repository: "octo/docs"},
	}}
	entry := func(repository string, workflows types.List, maxRunners types.Int64, maxRuntime duration, classes types.List) accessEntryModel {
		return accessEntryModel{Repository: types.StringValue(repository), Workflows: workflows, MaxRunners: maxRunners, MaxRuntime: maxRuntime, ResourceClasses: classes}
	}
	noList := types.ListNull(types.StringType)
	spelt := func(s string) duration { return duration{timetypes.NewGoDurationValueFromStringMust(s)} }
	for name, tc := range map[string]struct {
		prior types.List
		want  []string // each entry's max_runtime, "" for null
	}{
		"imported":           {types.ListNull(accessEntryType), []string{"1h30m", "2h", ""}},
		"spelt as the state": {accessValueOf(t, entry("octo/web", noList, types.Int64Null(), spelt("90m"), noList), entry("Octo/App", noList, types.Int64Null(), spelt("120m"), noList)), []string{"90m", "120m", ""}},
		"changed outside":    {accessValueOf(t, entry("octo/web", noList, types.Int64Null(), spelt("60m"), noList)), []string{"1h30m", "2h", ""}},
	} {
		t.Run(name, func(t *testing.T) {
			v := accessValue(policy)
			var got []accessEntryModel
			if d := v.ElementsAs(ctx, &got, false); d.HasError() {
				t.Fatal(d)
			}
			keptSpelling(t, tc.prior, got)
			if len(got) != len(policy.Repositories) {
				t.Fatalf("%d entries, want %d", len(got), len(policy.Repositories))
			}
			for i, e := range got {
				if e.Repository.ValueString() != policy.Repositories[i].Repository {
					t.Errorf("entry %d is %s, want %s: the order given", i, e.Repository, policy.Repositories[i].Repository)
				}
				if want := tc.want[i]; (want == "") != e.MaxRuntime.IsNull() || e.MaxRuntime.ValueString() != want {
					t.Errorf("entry %d max_runtime %s, want %q", i, e.MaxRuntime, want)
				}
			}
			if !got[2].Workflows.IsNull() || !got[2].MaxRunners.IsNull() || !got[2].ResourceClasses.IsNull() {
				t.Errorf("entry without caps reads as %+v, want nulls", got[2])
			}
			back, d := accessFromValue(ctx, v)
			if d.HasError() {
				t.Fatal(d)
			}
			if back.Repositories[0].MaxRunners != 8 || strings.Join(back.Repositories[0].ResourceClasses, ",") != "xlarge,large" ||
				back.Repositories[0].Workflows[0] != "octo/web/.github/workflows/*" || back.Repositories[1].MaxRuntime != protocol.Duration(2*time.Hour) {
				t.Errorf("read back as %+v, want %+v", back.Repositories, policy.Repositories)
			}
		})
	}
	if v := accessValue(nil); !v.IsNull() {
		t.Errorf("no policy reads as %s, want null", v)
	}
}

// keptSpelling does to the entries read what the framework does to a read's
// new state: each max_runtime semantically equal to the prior state's at
// the same index keeps the prior's spelling.
func keptSpelling(t *testing.T, prior types.List, read []accessEntryModel) {
	t.Helper()
	var priorEntries []accessEntryModel
	if d := prior.ElementsAs(context.Background(), &priorEntries, false); d.HasError() {
		t.Fatal(d)
	}
	for i := range min(len(read), len(priorEntries)) {
		was, now := priorEntries[i].MaxRuntime, read[i].MaxRuntime
		if was.IsNull() || now.IsNull() {
			continue
		}
		equal, d := was.StringSemanticEquals(context.Background(), now)
		if d.HasError() {
			t.Fatal(d)
		}
		if equal {
			read[i].MaxRuntime = was
		}
	}
}

func accessValueOf(t *testing.T, entries ...accessEntryModel) types.List {
	t.Helper()
	v, d := types.ListValueFrom(context.Background(), accessEntryType, entries)
	if d.HasError() {
		t.Fatal(d)
	}
	return v
}

// TestAccPool_access: the policy goes into the pool config item as written
// (the broker reads it there), changes in place, reads back on refresh and
// import with no drift (a max_runtime keeps its spelling), shows in the
// data source, and goes when removed. An invalid one fails the plan.
func TestAccPool_access(t *testing.T) {
	name := randomName("acc-access")
	config := func(access string) string {
		return fmt.Sprintf(`
resource "ec2runners_pool" "test" {
  name             = %q
  resource_classes = { large = { cpu = 2, memory_mib = 4096 }, xlarge = { cpu = 4, memory_mib = 8192 } }
  max_runtime      = "4h"
  %s
}

data "ec2runners_pool" "test" {
  name = ec2runners_pool.test.name
}`, name, access)
	}
	const first = `access = [
    {
      repository       = "octo/app"
      workflows        = ["octo/app/.github/workflows/ci.yml@refs/heads/main"]
      max_runners      = 10
      max_runtime      = "90m"
      resource_classes = ["large"]
    },
    { repository = "octo/docs" },
  ]`
	const second = `access = [
    { repository = "Octo/Docs", max_runners = 2 },
    {
      repository       = "octo/app"
      workflows        = ["octo/app/.github/workflows/ci.yml@refs/heads/main", "octo/app/.github/workflows/release-*"]
      max_runtime      = "2h"
      resource_classes = ["xlarge", "large"]
    },
  ]`
	stored := func(want *protocol.Access) resource.TestCheckFunc {
		return checkPoolConfig(name, func(cfg protocol.PoolConfig) error {
			if !reflect.DeepEqual(cfg.Access, want) {
				return fmt.Errorf("pool config access %+v, want %+v", cfg.Access, want)
			}
			return nil
		})
	}
	entry := func(address, attribute string, i int, want knownvalue.Check) statecheck.StateCheck {
		return statecheck.ExpectKnownValue(address, tfjsonpath.New("access").AtSliceIndex(i).AtMapKey(attribute), want)
	}
	emptyAfterApply := resource.ConfigPlanChecks{PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()}}
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testProviders,
		CheckDestroy:             checkPoolDestroyed,
		Steps: []resource.TestStep{
			{
				Config:           config(first),
				ConfigPlanChecks: emptyAfterApply,
				ConfigStateChecks: []statecheck.StateCheck{
					entry("ec2runners_pool.test", "max_runtime", 0, knownvalue.StringExact("90m")),
					entry("ec2runners_pool.test", "max_runners", 1, knownvalue.Null()),
					entry("ec2runners_pool.test", "workflows", 1, knownvalue.Null()),
					entry("data.ec2runners_pool.test", "repository", 0, knownvalue.StringExact("octo/app")),
					entry("data.ec2runners_pool.test", "max_runtime", 0, knownvalue.StringExact("1h30m")),
					entry("data.ec2runners_pool.test", "resource_classes", 0, knownvalue.ListExact([]knownvalue.Check{knownvalue.StringExact("large")})),
					entry("data.ec2runners_pool.test", "repository", 1, knownvalue.StringExact("octo/docs")),
				},
				Check: stored(&protocol.Access{Repositories: []protocol.RepositoryAccess{
					{Repository: "octo/app", Workflows: []string{"octo/app/.github/workflows/ci.yml@refs/heads/main"}, MaxRunners: 10,
						MaxRuntime: protocol.Duration(90 * time.Minute), ResourceClasses: []string{"large"}},
					{Repository: "octo/docs"},
				}}),
			},
			{
				Config: config(second),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply:             []plancheck.PlanCheck{plancheck.ExpectResourceAction("ec2runners_pool.test", plancheck.ResourceActionUpdate)},
					PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
				},
				ConfigStateChecks: []statecheck.StateCheck{
					entry("ec2runners_pool.test", "repository", 0, knownvalue.StringExact("Octo/Docs")),
					entry("data.ec2runners_pool.test", "max_runners", 0, knownvalue.Int64Exact(2)),
					entry("data.ec2runners_pool.test", "max_runtime", 1, knownvalue.StringExact("2h")),
				},
				Check: stored(&protocol.Access{Repositories: []protocol.RepositoryAccess{
					{Repository: "Octo/Docs", MaxRunners: 2},
					{Repository: "octo/app", Workflows: []string{"octo/app/.github/workflows/ci.yml@refs/heads/main", "octo/app/.github/workflows/release-*"},
						MaxRuntime: protocol.Duration(2 * time.Hour), ResourceClasses: []string{"xlarge", "large"}},
				}}),
			},
			{
				ResourceName: "ec2runners_pool.test", ImportState: true, ImportStateId: name, ImportStateVerify: true,
				ImportStateVerifyIgnore: []string{"timeouts"},
			},
			{
				// Refused at plan time; the pool keeps its policy.
				Config:      config(strings.Replace(second, `"octo/app"`, `"octo/docs"`, 1)),
				ExpectError: regexp.MustCompile(wrapped(regexp.QuoteMeta(`Attribute access[1].repository: repository "octo/docs" is also access[0].repository ("Octo/Docs")`))),
			},
			{
				Config:           config(""),
				ConfigPlanChecks: emptyAfterApply,
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("ec2runners_pool.test", tfjsonpath.New("access"), knownvalue.Null()),
					statecheck.ExpectKnownValue("data.ec2runners_pool.test", tfjsonpath.New("access"), knownvalue.Null()),
				},
				Check: stored(nil),
			},
		},
	})
}
