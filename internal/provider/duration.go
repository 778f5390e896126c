package provider

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-timetypes/timetypes"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/attr/xattr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types/basetypes"
	"github.com/hashicorp/terraform-plugin-go/tftypes"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

// duration is the value of every duration attribute ("90s", "7m",
// "1h30m"): a timetypes.GoDuration. The library reads it (ValueGoDuration)
// and gives it semantic equality, so the framework keeps the user's
// spelling in the state when what AWS holds is the same duration ("90m"
// stays "90m" though a read finds 1h30m): no false drift on refresh.
//
// One thing differs from timetypes.GoDuration: the library's value checks
// its own format before the attribute's validators run, and then they do
// not, so "7 minutes" would be refused without the range the attribute
// allows. Here the attribute's durationBetween validator, which every
// configurable duration has, refuses a malformed duration and one out of
// range alike, in one error naming the range.
type duration struct{ timetypes.GoDuration }

// durationType is the CustomType of every duration attribute.
type durationType struct{ timetypes.GoDurationType }

var (
	_ basetypes.StringTypable                    = durationType{}
	_ basetypes.StringValuableWithSemanticEquals = duration{}
)

func (durationType) String() string { return "provider.durationType" }

func (durationType) ValueType(context.Context) attr.Value { return duration{} }

func (durationType) Equal(o attr.Type) bool {
	_, ok := o.(durationType)
	return ok
}

func (durationType) ValueFromString(_ context.Context, in basetypes.StringValue) (basetypes.StringValuable, diag.Diagnostics) {
	return duration{timetypes.GoDuration{StringValue: in}}, nil
}

func (t durationType) ValueFromTerraform(ctx context.Context, in tftypes.Value) (attr.Value, error) {
	v, err := t.GoDurationType.ValueFromTerraform(ctx, in)
	if err != nil {
		return nil, err
	}
	d, ok := v.(timetypes.GoDuration)
	if !ok {
		return nil, fmt.Errorf("unexpected value type %T", v)
	}
	return duration{d}, nil
}

func (duration) Type(context.Context) attr.Type { return durationType{} }

func (d duration) Equal(o attr.Value) bool {
	other, ok := o.(duration)
	return ok && d.GoDuration.Equal(other.GoDuration)
}

// ValidateAttribute leaves the format to the attribute's durationBetween
// validator (see duration).
func (duration) ValidateAttribute(context.Context, xattr.ValidateAttributeRequest, *xattr.ValidateAttributeResponse) {
}

// StringSemanticEquals is the library's: the same duration, however spelt.
func (d duration) StringSemanticEquals(ctx context.Context, other basetypes.StringValuable) (bool, diag.Diagnostics) {
	if o, ok := other.(duration); ok {
		other = o.GoDuration
	}
	return d.GoDuration.StringSemanticEquals(ctx, other)
}

// get is the duration, 0 when the attribute is null (left to its default).
func (d duration) get(diags *diag.Diagnostics) time.Duration {
	if d.IsNull() {
		return 0
	}
	v, problems := d.ValueGoDuration()
	diags.Append(problems...)
	return v
}

// durationOf is d as the provider writes durations: protocol.FormatDuration,
// without zero units (1h30m, not time's 1h30m0s).
func durationOf(d time.Duration) duration {
	return duration{timetypes.GoDuration{StringValue: basetypes.NewStringValue(protocol.FormatDuration(d))}}
}

// durationNull is a duration attribute not set.
func durationNull() duration { return duration{timetypes.NewGoDurationNull()} }
