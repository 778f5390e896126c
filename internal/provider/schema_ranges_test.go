package provider

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/action"
	actionschema "github.com/hashicorp/terraform-plugin-framework/action/schema"
	"github.com/hashicorp/terraform-plugin-framework/datasource"
	dsschema "github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/list"
	listschema "github.com/hashicorp/terraform-plugin-framework/list/schema"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	providerschema "github.com/hashicorp/terraform-plugin-framework/provider/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	resourceschema "github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

// describedValidator is what the framework's validators and ours have in
// common.
type describedValidator interface {
	Description(context.Context) string
}

// validatedAttribute is an attribute with validators, by its path.
type validatedAttribute struct {
	path        string
	description string
	validators  []describedValidator
}

// Every validated attribute's description states what its validators
// enforce: a duration's bounds (`1m` to `168h`), every number a validator
// names (a length, a count, a bound), and every value OneOf allows, in
// backticks. The Registry's pages show the descriptions; the validators'
// own messages come only with an error.
func TestSchemaDescriptions_stateTheValidatedRanges(t *testing.T) {
	ctx := context.Background()
	var attrs []validatedAttribute
	p := New("test")()
	var ps provider.SchemaResponse
	p.Schema(ctx, provider.SchemaRequest{}, &ps)
	attrs = append(attrs, providerAttributes("provider", ps.Schema.Attributes, ps.Schema.Blocks)...)
	pp := p.(interface {
		Resources(context.Context) []func() resource.Resource
		DataSources(context.Context) []func() datasource.DataSource
		ListResources(context.Context) []func() list.ListResource
		Actions(context.Context) []func() action.Action
	})
	for _, r := range pp.Resources(ctx) {
		res := r()
		var meta resource.MetadataResponse
		res.Metadata(ctx, resource.MetadataRequest{ProviderTypeName: "ec2runners"}, &meta)
		var s resource.SchemaResponse
		res.Schema(ctx, resource.SchemaRequest{}, &s)
		attrs = append(attrs, resourceAttributes(meta.TypeName, s.Schema.Attributes, s.Schema.Blocks)...)
	}
	for _, d := range pp.DataSources(ctx) {
		ds := d()
		var meta datasource.MetadataResponse
		ds.Metadata(ctx, datasource.MetadataRequest{ProviderTypeName: "ec2runners"}, &meta)
		var s datasource.SchemaResponse
		ds.Schema(ctx, datasource.SchemaRequest{}, &s)
		attrs = append(attrs, dataSourceAttributes("data."+meta.TypeName, s.Schema.Attributes, s.Schema.Blocks)...)
	}
	for _, l := range pp.ListResources(ctx) {
		lr := l()
		var meta resource.MetadataResponse
		lr.Metadata(ctx, resource.MetadataRequest{ProviderTypeName: "ec2runners"}, &meta)
		var s list.ListResourceSchemaResponse
		lr.ListResourceConfigSchema(ctx, list.ListResourceSchemaRequest{}, &s)
		attrs = append(attrs, listAttributes("list."+meta.TypeName, s.Schema.Attributes, s.Schema.Blocks)...)
	}
	for _, a := range pp.Actions(ctx) {
		act := a()
		var meta action.MetadataResponse
		act.Metadata(ctx, action.MetadataRequest{ProviderTypeName: "ec2runners"}, &meta)
		var s action.SchemaResponse
		act.Schema(ctx, action.SchemaRequest{}, &s)
		attrs = append(attrs, actionAttributes("action."+meta.TypeName, s.Schema.Attributes, s.Schema.Blocks)...)
	}
	if len(attrs) < 40 {
		t.Fatalf("found %d validated attributes, want every schema's", len(attrs))
	}
	for _, a := range attrs {
		for _, problem := range describesValidators(ctx, a) {
			t.Errorf("%s: %s", a.path, problem)
		}
	}
}

var (
	numberPattern = regexp.MustCompile(`[0-9]+(?:,[0-9]{3})*`)
	quotedPattern = regexp.MustCompile(`"([^"]*)"`)
	oneOfPattern  = regexp.MustCompile(`value must be one of: \[([^]]*)\]`)
	// examplePattern is an example a validator gives, not a bound.
	// examplePattern is an example a validator gives, not a bound: a
	// value such as one, quoted, a character range (0-9), an address.
	examplePattern = regexp.MustCompile(`(?:such as|e\.g\.) \S+|"[^"]*"|\b(?:A-Z|a-z|0-9)\b|\b[0-9]+(?:\.[0-9]+){3}(?:/[0-9]+)?`)
)

// numbers are the numbers a text names ("1,224" as 1224; with words,
// "one" as 1), but for those of its examples ("such as lt-0123abc",
// quoted values).
func numbers(text string, words bool) []string {
	var out []string
	text = examplePattern.ReplaceAllString(text, "")
	for _, n := range numberPattern.FindAllString(text, -1) {
		n = strings.TrimLeft(strings.ReplaceAll(n, ",", ""), "0")
		if n == "" {
			n = "0"
		}
		out = append(out, n)
	}
	if words && regexp.MustCompile(`\bone\b`).MatchString(text) {
		out = append(out, "1")
	}
	return out
}

// describesValidators says what a's description leaves out of what its
// validators enforce.
func describesValidators(ctx context.Context, a validatedAttribute) []string {
	var problems []string
	described := numbers(a.description, true)
	for _, v := range a.validators {
		text := v.Description(ctx)
		switch v := v.(type) {
		case durationValidator:
			lo, hi := "`"+protocol.FormatDuration(v.min)+"`", "`"+protocol.FormatDuration(v.max)+"`"
			if !strings.Contains(a.description, lo) || !strings.Contains(a.description, hi) {
				problems = append(problems, fmt.Sprintf("the description does not give the range %s to %s (%s)", lo, hi, text))
			}
			continue
		}
		if m := oneOfPattern.FindStringSubmatch(text); m != nil {
			for _, q := range quotedPattern.FindAllStringSubmatch(m[1], -1) {
				if !strings.Contains(a.description, "`"+q[1]+"`") {
					problems = append(problems, fmt.Sprintf("the description does not name the allowed value `%s` (%s)", q[1], text))
				}
			}
			text = oneOfPattern.ReplaceAllString(text, "")
		}
		for _, n := range numbers(text, false) {
			if !slices.Contains(described, n) {
				problems = append(problems, fmt.Sprintf("the description does not give %s (the validator: %s)", n, text))
			}
		}
	}
	return problems
}

// The schemas' attributes with validators, by kind of schema.

func resourceAttributes(prefix string, attrs map[string]resourceschema.Attribute, blocks map[string]resourceschema.Block) []validatedAttribute {
	var out []validatedAttribute
	for name, a := range attrs {
		path := prefix + "." + name
		out = append(out, validated(path, schemaDescription(a), a)...)
		switch a := a.(type) {
		case resourceschema.SingleNestedAttribute:
			out = append(out, resourceAttributes(path, a.Attributes, nil)...)
		case resourceschema.ListNestedAttribute:
			out = append(out, resourceAttributes(path, a.NestedObject.Attributes, nil)...)
		case resourceschema.MapNestedAttribute:
			out = append(out, resourceAttributes(path, a.NestedObject.Attributes, nil)...)
		case resourceschema.SetNestedAttribute:
			out = append(out, resourceAttributes(path, a.NestedObject.Attributes, nil)...)
		}
	}
	for name, b := range blocks {
		switch b := b.(type) {
		case resourceschema.SingleNestedBlock:
			out = append(out, resourceAttributes(prefix+"."+name, b.Attributes, b.Blocks)...)
		case resourceschema.ListNestedBlock:
			out = append(out, resourceAttributes(prefix+"."+name, b.NestedObject.Attributes, b.NestedObject.Blocks)...)
		}
	}
	return out
}

func dataSourceAttributes(prefix string, attrs map[string]dsschema.Attribute, blocks map[string]dsschema.Block) []validatedAttribute {
	var out []validatedAttribute
	for name, a := range attrs {
		path := prefix + "." + name
		out = append(out, validated(path, schemaDescription(a), a)...)
		switch a := a.(type) {
		case dsschema.SingleNestedAttribute:
			out = append(out, dataSourceAttributes(path, a.Attributes, nil)...)
		case dsschema.ListNestedAttribute:
			out = append(out, dataSourceAttributes(path, a.NestedObject.Attributes, nil)...)
		case dsschema.MapNestedAttribute:
			out = append(out, dataSourceAttributes(path, a.NestedObject.Attributes, nil)...)
		}
	}
	for name, b := range blocks {
		switch b := b.(type) {
		case dsschema.SingleNestedBlock:
			out = append(out, dataSourceAttributes(prefix+"."+name, b.Attributes, b.Blocks)...)
		case dsschema.ListNestedBlock:
			out = append(out, dataSourceAttributes(prefix+"."+name, b.NestedObject.Attributes, b.NestedObject.Blocks)...)
		}
	}
	return out
}

func providerAttributes(prefix string, attrs map[string]providerschema.Attribute, blocks map[string]providerschema.Block) []validatedAttribute {
	var out []validatedAttribute
	for name, a := range attrs {
		path := prefix + "." + name
		out = append(out, validated(path, schemaDescription(a), a)...)
		switch a := a.(type) {
		case providerschema.SingleNestedAttribute:
			out = append(out, providerAttributes(path, a.Attributes, nil)...)
		case providerschema.ListNestedAttribute:
			out = append(out, providerAttributes(path, a.NestedObject.Attributes, nil)...)
		}
	}
	for name, b := range blocks {
		switch b := b.(type) {
		case providerschema.SingleNestedBlock:
			out = append(out, providerAttributes(prefix+"."+name, b.Attributes, b.Blocks)...)
		case providerschema.ListNestedBlock:
			out = append(out, providerAttributes(prefix+"."+name, b.NestedObject.Attributes, b.NestedObject.Blocks)...)
		}
	}
	return out
}

func listAttributes(prefix string, attrs map[string]listschema.Attribute, blocks map[string]listschema.Block) []validatedAttribute {
	var out []validatedAttribute
	for name, a := range attrs {
		out = append(out, validated(prefix+"."+name, schemaDescription(a), a)...)
	}
	for name, b := range blocks {
		if b, ok := b.(listschema.ListNestedBlock); ok {
			out = append(out, listAttributes(prefix+"."+name, b.NestedObject.Attributes, b.NestedObject.Blocks)...)
		}
	}
	return out
}

func actionAttributes(prefix string, attrs map[string]actionschema.Attribute, blocks map[string]actionschema.Block) []validatedAttribute {
	var out []validatedAttribute
	for name, a := range attrs {
		out = append(out, validated(prefix+"."+name, schemaDescription(a), a)...)
	}
	for name, b := range blocks {
		if b, ok := b.(actionschema.SingleNestedBlock); ok {
			out = append(out, actionAttributes(prefix+"."+name, b.Attributes, b.Blocks)...)
		}
	}
	return out
}

// schemaDescription is an attribute's description as the docs show it: the
// Markdown one, when it has one.
func schemaDescription(a interface {
	GetDescription() string
	GetMarkdownDescription() string
}) string {
	if d := a.GetMarkdownDescription(); d != "" {
		return d
	}
	return a.GetDescription()
}

// The attributes' validator accessors, whatever the kind of schema.
type (
	stringValidated interface{ StringValidators() []validator.String }
	int64Validated  interface{ Int64Validators() []validator.Int64 }
	listValidated   interface{ ListValidators() []validator.List }
	mapValidated    interface{ MapValidators() []validator.Map }
	objectValidated interface{ ObjectValidators() []validator.Object }
)

// validated is an attribute with its validators, or nothing when it has
// none.
func validated(path, description string, a any) []validatedAttribute {
	var vs []describedValidator
	add := func(n int, at func(int) describedValidator) {
		for i := range n {
			vs = append(vs, at(i))
		}
	}
	switch v := a.(type) {
	case stringValidated:
		s := v.StringValidators()
		add(len(s), func(i int) describedValidator { return s[i] })
	case int64Validated:
		s := v.Int64Validators()
		add(len(s), func(i int) describedValidator { return s[i] })
	case listValidated:
		s := v.ListValidators()
		add(len(s), func(i int) describedValidator { return s[i] })
	case mapValidated:
		s := v.MapValidators()
		add(len(s), func(i int) describedValidator { return s[i] })
	case objectValidated:
		s := v.ObjectValidators()
		add(len(s), func(i int) describedValidator { return s[i] })
	}
	if len(vs) == 0 {
		return nil
	}
	return []validatedAttribute{{path: path, description: description, validators: vs}}
}
