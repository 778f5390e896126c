// Command fakebroker answers the broker's wire protocol (internal/broker)
// from memory, for the provider's tests of its broker glue: it verifies no
// token, only that one came, and takes the claims' repository from
// FAKE_REPOSITORY, as the real broker takes it from the token. Claims last
// as long as its process.
package main

import (
	"context"
	"fmt"
	"os"
	"sync"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/broker"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/claim"
)

var (
	mu     sync.Mutex
	claims = map[string]claim.Record{}
)

func handle(_ context.Context, req broker.Request) (broker.Response, error) {
	if req.IDToken == "" {
		return refuse(broker.ErrorDenied, "no token"), nil
	}
	mu.Lock()
	defer mu.Unlock()
	key := req.Pool + "/" + req.RunID
	rec, found := claims[key]
	switch req.Operation {
	case broker.OpClaim:
		if found && rec.Request.Claimant != req.Claim.Claimant {
			return refuse(broker.ErrorOtherClaimant, fmt.Sprintf("run %s of pool %s: %v: by %q, not %q", req.RunID, req.Pool, claim.ErrOtherClaimant, rec.Request.Claimant, req.Claim.Claimant)), nil
		}
		q := *req.Claim
		q.Label, q.Repository = q.RunID+"-fakelabel", os.Getenv("FAKE_REPOSITORY")
		rec = claim.Record{Request: q, State: "complete"}
		for i := range q.InstanceCount {
			rec.Instances = append(rec.Instances, claim.Instance{ID: fmt.Sprintf("i-%s-%d", q.RunID, i), InstanceType: "c7i.large", UsageClass: q.UsageClass, Source: claim.SourceFleet})
		}
		claims[key] = rec
		return broker.Response{Result: &claim.Result{Label: q.Label, Instances: rec.Instances, Created: len(rec.Instances)},
			Warnings: [][2]string{{"Claimed by the fake broker", "token " + req.IDToken}}}, nil
	case broker.OpRead:
		if !found {
			return broker.Response{}, nil
		}
		return broker.Response{Record: &rec, Live: rec.Instances}, nil
	case broker.OpRelease:
		delete(claims, key)
		var outcomes []string
		for _, inst := range rec.Instances {
			outcomes = append(outcomes, inst.ID+": released")
		}
		return broker.Response{Outcomes: outcomes}, nil
	}
	return refuse(broker.ErrorInvalid, "unknown operation "+req.Operation), nil
}

func refuse(kind, message string) broker.Response {
	return broker.Response{Error: &broker.Error{Kind: kind, Message: message}}
}

func main() { lambda.Start(handle) }
