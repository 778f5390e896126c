package awsfake

import (
	"context"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sts"
)

// STS answers GetCallerIdentity as STS does for a role session in Account.
type STS struct {
	mu sync.Mutex
	// Account and Arn are the caller's ("": Account, and a role session
	// in it).
	Account, Arn string
	// Err, when set, fails every call.
	Err error
	// Log, when set, records the calls with other fakes'.
	Log *Log
}

func (s *STS) GetCallerIdentity(ctx context.Context, in *sts.GetCallerIdentityInput, _ ...func(*sts.Options)) (*sts.GetCallerIdentityOutput, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.Log.record("sts", "GetCallerIdentity", in)
	if s.Err != nil {
		return nil, s.Err
	}
	account, arn := s.Account, s.Arn
	if account == "" {
		account = Account
	}
	if arn == "" {
		arn = "arn:aws:sts::" + account + ":assumed-role/ci/session"
	}
	return &sts.GetCallerIdentityOutput{Account: aws.String(account), Arn: aws.String(arn), UserId: aws.String("AROATEST:session")}, nil
}
