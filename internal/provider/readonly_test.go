package provider

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/awsconfig"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/claim"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/pool"
)

// readAPI tells a read from a write by the API's name: a describe, get, list,
// query or batch get. Everything else (a receive too: it hides messages)
// changes something.
func readAPI(name string) bool {
	for _, prefix := range []string{"Describe", "Get", "List"} {
		if strings.HasPrefix(name, prefix) {
			return true
		}
	}
	return name == "Query" || name == "Scan" || name == "BatchGetItem"
}

// The clients of the read paths (reader, readManager) refuse every write
// of the pool logic's client interfaces before it leaves the provider, and
// pass every read through: a Read cannot write, whatever it calls. A write
// added to an interface and not refused fails here.
func TestReadPathClientsRefuseEveryWrite(t *testing.T) {
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		http.Error(w, "no AWS here", http.StatusBadRequest)
	}))
	defer srv.Close()
	clients, err := awsconfig.New(context.Background(), awsconfig.Options{
		Region: "us-east-1", AccessKey: "test", SecretKey: "test", MaxRetries: 1,
		Endpoints: awsconfig.Endpoints{SQS: srv.URL, DynamoDB: srv.URL, EC2: srv.URL, STS: srv.URL},
	})
	if err != nil {
		t.Fatal(err)
	}
	d := &providerData{clients: clients}
	c, m := d.reader(context.Background()), d.readManager()
	views := []struct {
		client any
		iface  reflect.Type
	}{
		{c.DynamoDB, reflect.TypeFor[claim.DynamoDBClient]()},
		{c.SQS, reflect.TypeFor[claim.SQSClient]()},
		{c.EC2, reflect.TypeFor[claim.EC2Client]()},
		{m.DynamoDB, reflect.TypeFor[pool.DynamoDBClient]()},
		{m.SQS, reflect.TypeFor[pool.SQSClient]()},
		{m.EC2, reflect.TypeFor[pool.EC2Client]()},
		{m.STS, reflect.TypeFor[pool.STSClient]()},
	}
	writes := 0
	for _, v := range views {
		value := reflect.ValueOf(v.client)
		for i := range v.iface.NumMethod() {
			name := v.iface.Method(i).Name
			method := value.MethodByName(name)
			in := reflect.New(method.Type().In(1).Elem()) // a zero input
			before := requests.Load()
			out := method.Call([]reflect.Value{reflect.ValueOf(context.Background()), in})
			err, _ := out[1].Interface().(error)
			refused := errors.Is(err, errReadOnly)
			switch {
			case readAPI(name) && refused:
				t.Errorf("%s.%s, a read, was refused: %v", v.iface, name, err)
			case !readAPI(name) && !refused:
				t.Errorf("%s.%s, a write, was not refused (err %v)", v.iface, name, err)
			case !readAPI(name) && requests.Load() != before:
				t.Errorf("%s.%s, a write, reached the endpoint", v.iface, name)
			}
			if !readAPI(name) {
				writes++
			}
		}
	}
	if writes == 0 {
		t.Fatal("no write checked")
	}
	// The pool's own clients stay writable: maintenance runs in applies.
	if _, ok := d.claimer(context.Background()).DynamoDB.(readOnlyDynamoDB); ok {
		t.Error("the claimer of applies got the read-only clients")
	}
}
