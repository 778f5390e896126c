package github

import (
	"strings"
	"testing"
)

func TestCheckURL(t *testing.T) {
	tests := []struct {
		url     string
		wantErr string // substring; "" means accepted
	}{
		{url: "https://github.com"},
		{url: "https://ghe.example.com/api/v3"},
		{url: "HTTPS://GitHub.com/"},
		{url: "https://mirror.example.com:8443/runner.tar.gz?a=1"},
		{url: "http://127.0.0.1:8080"},
		{url: "http://127.1.2.3/runner.tar.gz"},
		{url: "http://[::1]:9000/api/v3"},
		{url: "http://localhost:4000"},
		{url: "http://LocalHost"},

		{url: "http://github.com", wantErr: "plain http:// to a host that is not loopback"},
		{url: "http://ghe.example.com/api/v3", wantErr: "use https:// (http:// only to a loopback host: 127.0.0.0/8, ::1 or localhost)"},
		{url: "http://128.0.0.1", wantErr: "not loopback"},
		{url: "http://10.0.0.1", wantErr: "not loopback"},
		{url: "http://[::2]", wantErr: "not loopback"},
		{url: "http://localhost.example.com", wantErr: "not loopback"},
		{url: "http://127.0.0.1.nip.io", wantErr: "not loopback"},
		{url: "ftp://mirror/runner.tgz", wantErr: "is not an https:// URL"},
		{url: "s3://bucket/runner.tgz", wantErr: "is not an https:// URL"},
		{url: "github.com", wantErr: "is not a URL"},
		{url: "https://", wantErr: "is not a URL"},
		{url: "https:///api/v3", wantErr: "is not a URL"},
		{url: "", wantErr: "is not a URL"},
		{url: "https://github.com/a b", wantErr: "is not a URL"},
	}
	for _, tt := range tests {
		err := CheckURL(tt.url)
		switch {
		case tt.wantErr == "" && err != nil:
			t.Errorf("CheckURL(%q) = %v, want nil", tt.url, err)
		case tt.wantErr != "" && err == nil:
			t.Errorf("CheckURL(%q) = nil, want an error", tt.url)
		case tt.wantErr != "" && !strings.Contains(err.Error(), tt.wantErr):
			t.Errorf("CheckURL(%q) = %q, want it to mention %q", tt.url, err, tt.wantErr)
		}
	}
}
