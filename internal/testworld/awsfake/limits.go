package awsfake

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/document"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/awslimits"
)

// The fakes refuse what AWS refuses (internal/awslimits), as the emulator's
// front does, with the same rules and AWS's answer as the SDK reports it.
// A call's typed input is read as the wire form the SDK would send
// (Document; limits_test.go checks it against the SDK's own serialization
// for every action the fakes implement); a request the rules refuse then
// goes through the SDK's own client, whose HTTP client answers the refusal
// in the service's protocol, so that the caller gets exactly the error the
// SDK makes of AWS's answer. The SDK's client runs only for refusals: it
// costs tens of microseconds a call, and the simulator makes millions. A
// refused call changes nothing and is not recorded.

// limits checks a call of service's action with input in; sdk makes the
// same call with the checking clients (ec2Limits, sqsLimits, tableLimits,
// logsLimits).
func limits(ctx context.Context, service, action string, in any, sdk func(ctx context.Context) error) error {
	if !awslimits.Watches(service, action) {
		return nil
	}
	refusal := awslimits.Check(service, action, Document(service, in))
	if refusal == nil {
		return nil
	}
	if err := sdk(context.WithoutCancel(ctx)); err != nil && !errors.Is(err, errWithinLimits) {
		return err
	}
	// The SDK's wire form passed where the document did not: Document
	// and the SDK disagree, which limits_test.go rules out.
	return &smithy.GenericAPIError{Code: refusal.Code, Message: refusal.Message + " (awsfake: the SDK's request passed)"}
}

// sdkErr is the error of a checking client's call.
func sdkErr[T any](_ T, err error) error { return err }

// errWithinLimits ends the SDK's call of a request the rules take.
var errWithinLimits = errors.New("awsfake: within AWS's limits")

// limitsClient answers the requests of one service as the emulator's front
// would.
type limitsClient struct{ service string }

func (c limitsClient) Do(r *http.Request) (*http.Response, error) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, err
	}
	refusal := awslimits.CheckHTTP(c.service, r.Header, body)
	if refusal == nil {
		return nil, errWithinLimits
	}
	rec := httptest.NewRecorder()
	awslimits.WriteRefusal(rec, c.service, refusal)
	resp := rec.Result()
	resp.Request = r
	return resp, nil
}

// The checking clients: no credentials (nothing is signed, nothing is
// sent), no retries (a refusal is final, and errWithinLimits is no
// failure).
var (
	nowhere     = aws.String("http://awsfake.invalid")
	ec2Limits   = ec2.New(ec2.Options{Region: "us-east-1", BaseEndpoint: nowhere, Credentials: aws.AnonymousCredentials{}, HTTPClient: limitsClient{"ec2"}, Retryer: aws.NopRetryer{}})
	sqsLimits   = sqs.New(sqs.Options{Region: "us-east-1", BaseEndpoint: nowhere, Credentials: aws.AnonymousCredentials{}, HTTPClient: limitsClient{"sqs"}, Retryer: aws.NopRetryer{}})
	tableLimits = dynamodb.New(dynamodb.Options{Region: "us-east-1", BaseEndpoint: nowhere, Credentials: aws.AnonymousCredentials{}, HTTPClient: limitsClient{"dynamodb"}, Retryer: aws.NopRetryer{}})
	logsLimits  = cloudwatchlogs.New(cloudwatchlogs.Options{Region: "us-east-1", BaseEndpoint: nowhere, Credentials: aws.AnonymousCredentials{}, HTTPClient: limitsClient{"logs"}, Retryer: aws.NopRetryer{}})
)

// ec2ListNames are the names EC2's query protocol gives the lists of the
// inputs the fakes take, where they differ from the Go field's.
var ec2ListNames = map[string]string{
	"TagSpecifications": "TagSpecification", "Tags": "Tag", "Filters": "Filter", "Values": "Value",
	"InstanceIds": "InstanceId", "ImageIds": "ImageId", "LaunchTemplateIds": "LaunchTemplateId",
	"LaunchTemplateNames": "LaunchTemplateName", "Versions": "LaunchTemplateVersion", "InstanceTypes": "InstanceType",
	"Owners": "Owner", "ExecutableUsers": "ExecutableBy", "SecurityGroupIds": "SecurityGroupId", "SecurityGroups": "SecurityGroup",
	"BlockDeviceMappings": "BlockDeviceMapping", "NetworkInterfaces": "NetworkInterface", "AllowedInstanceTypes": "AllowedInstanceType",
}

// Document is an SDK input of service as internal/awslimits reads its wire
// form. SQS's, DynamoDB's and CloudWatch Logs' inputs serialize themselves through the SDK's
// own schema serializer (into a document rather than JSON); EC2's are read
// by reflection as its query protocol writes them: the fields the SDK sends
// (set pointers, non-zero values, non-nil lists), named as the protocol
// names them (ec2ListNames), every leaf as text.
func Document(service string, in any) map[string]any {
	if ser, ok := in.(smithy.Serializable); ok && service != "ec2" {
		d := &docSerializer{}
		ser.Serialize(d)
		doc, _ := d.root.(map[string]any)
		return doc
	}
	doc, _ := queryValue(reflect.ValueOf(in)).(map[string]any)
	if doc == nil {
		doc = map[string]any{}
	}
	return doc
}

func queryValue(v reflect.Value) any {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return nil
		}
		return queryValue(v.Elem())
	case reflect.Struct:
		out := map[string]any{}
		t := v.Type()
		for i := range t.NumField() {
			f, fv := t.Field(i), v.Field(i)
			if !f.IsExported() || fv.Kind() != reflect.Pointer && fv.Kind() != reflect.Slice && fv.IsZero() || fv.Kind() == reflect.Slice && fv.IsNil() {
				continue // the SDK sends no zero value of a value type, nor a nil list
			}
			name := f.Name
			if fv.Kind() == reflect.Slice && ec2ListNames[name] != "" {
				name = ec2ListNames[name]
			}
			if e := queryValue(fv); e != nil {
				out[name] = e
			}
		}
		return out
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return base64.StdEncoding.EncodeToString(v.Bytes())
		}
		out := make([]any, v.Len())
		for i := range out {
			out[i] = queryValue(v.Index(i))
		}
		return out
	case reflect.String:
		return v.String()
	case reflect.Bool:
		return strconv.FormatBool(v.Bool())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return strconv.FormatInt(v.Int(), 10)
	case reflect.Float32, reflect.Float64:
		return strconv.FormatFloat(v.Float(), 'g', -1, 64)
	}
	return nil
}

// docSerializer is a smithy.ShapeSerializer that builds the document of
// the JSON the SDK would write: members by name, maps by key, lists in
// order, unions as {variant: value}, numbers as json.Number, blobs in
// base64.
type docSerializer struct {
	root  any
	stack []*docFrame
}

// docFrame is an open structure, map or list.
type docFrame struct {
	obj   map[string]any
	list  []any
	isMap bool
	key   string      // the map's next key
	close func([]any) // puts a closed list where it belongs
}

func (d *docSerializer) put(schema *smithy.Schema, v any) {
	if len(d.stack) == 0 {
		d.root = v
		return
	}
	top := d.stack[len(d.stack)-1]
	switch {
	case top.obj == nil:
		top.list = append(top.list, v)
	case top.isMap:
		top.obj[top.key] = v
	default:
		top.obj[schema.MemberName()] = v
	}
}

func (d *docSerializer) open(schema *smithy.Schema, isMap bool) {
	m := map[string]any{}
	d.put(schema, m)
	d.stack = append(d.stack, &docFrame{obj: m, isMap: isMap})
}

func (d *docSerializer) pop() *docFrame {
	top := d.stack[len(d.stack)-1]
	d.stack = d.stack[:len(d.stack)-1]
	return top
}

func (d *docSerializer) Bytes() []byte { return nil }

func (d *docSerializer) WriteInt8(s *smithy.Schema, v int8)   { d.WriteInt64(s, int64(v)) }
func (d *docSerializer) WriteInt16(s *smithy.Schema, v int16) { d.WriteInt64(s, int64(v)) }
func (d *docSerializer) WriteInt32(s *smithy.Schema, v int32) { d.WriteInt64(s, int64(v)) }
func (d *docSerializer) WriteInt64(s *smithy.Schema, v int64) {
	d.put(s, json.Number(strconv.FormatInt(v, 10)))
}
func (d *docSerializer) WriteFloat32(s *smithy.Schema, v float32) { d.WriteFloat64(s, float64(v)) }
func (d *docSerializer) WriteFloat64(s *smithy.Schema, v float64) {
	d.put(s, json.Number(strconv.FormatFloat(v, 'g', -1, 64)))
}
func (d *docSerializer) WriteBool(s *smithy.Schema, v bool)     { d.put(s, v) }
func (d *docSerializer) WriteString(s *smithy.Schema, v string) { d.put(s, v) }
func (d *docSerializer) WriteBigInt(s *smithy.Schema, v *big.Int) {
	d.put(s, json.Number(v.String()))
}
func (d *docSerializer) WriteBigFloat(s *smithy.Schema, v *big.Float) {
	d.put(s, json.Number(v.Text('g', -1)))
}
func (d *docSerializer) WriteBlob(s *smithy.Schema, v []byte) {
	d.put(s, base64.StdEncoding.EncodeToString(v))
}
func (d *docSerializer) WriteTime(s *smithy.Schema, v time.Time) {
	d.put(s, json.Number(strconv.FormatInt(v.Unix(), 10)))
}
func (d *docSerializer) WriteUnion(s, _ *smithy.Schema)                   { d.open(s, false) }
func (d *docSerializer) CloseUnion()                                      { d.pop() }
func (d *docSerializer) WriteDocument(s *smithy.Schema, _ document.Value) {}
func (d *docSerializer) WriteNil(s *smithy.Schema)                        { d.put(s, nil) }
func (d *docSerializer) WriteStruct(s *smithy.Schema)                     { d.open(s, false) }
func (d *docSerializer) CloseStruct()                                     { d.pop() }
func (d *docSerializer) WriteMap(s *smithy.Schema)                        { d.open(s, true) }
func (d *docSerializer) WriteKey(_ *smithy.Schema, key string)            { d.stack[len(d.stack)-1].key = key }
func (d *docSerializer) CloseMap()                                        { d.pop() }

func (d *docSerializer) WriteList(s *smithy.Schema) {
	place := func(l []any) { d.put(s, l) }
	d.stack = append(d.stack, &docFrame{list: []any{}, close: place})
}

func (d *docSerializer) CloseList() {
	top := d.pop()
	top.close(top.list)
}
