package faultproxy

import (
	"encoding/xml"
	"testing"
	"time"
)

// hideInstances cuts the unknown instances out of a DescribeInstances
// answer, whatever items they nest, keeps a reservation with a known one,
// drops one left empty, and leaves the rest as it was.
func TestHideInstances(t *testing.T) {
	const answer = `<?xml version="1.0" encoding="utf-8"?>
<DescribeInstancesResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15"><reservationSet>` +
		`<item><reservationId>r-1</reservationId><instancesSet>` +
		`<item><instanceId>i-new1</instanceId><blockDeviceMapping><item><deviceName>/dev/sda1</deviceName></item></blockDeviceMapping></item>` +
		`<item><instanceId>i-old</instanceId><tagSet><item><key>k</key><value>v</value></item></tagSet></item>` +
		`</instancesSet></item>` +
		`<item><reservationId>r-2</reservationId><instancesSet><item><instanceId>i-new2</instanceId></item></instancesSet></item>` +
		`</reservationSet><requestId>x</requestId></DescribeInstancesResponse>`
	p := &Proxy{realism: Realism{EC2Lag: time.Minute}, launched: map[string]time.Time{"i-new1": time.Now(), "i-new2": time.Now()}}
	var got struct {
		Reservations []struct {
			ID        string   `xml:"reservationId"`
			Instances []string `xml:"instancesSet>item>instanceId"`
			Tags      []string `xml:"instancesSet>item>tagSet>item>key"`
		} `xml:"reservationSet>item"`
		RequestID string `xml:"requestId"`
	}
	if err := xml.Unmarshal(p.hideInstances([]byte(answer)), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Reservations) != 1 || got.Reservations[0].ID != "r-1" || len(got.Reservations[0].Instances) != 1 ||
		got.Reservations[0].Instances[0] != "i-old" || len(got.Reservations[0].Tags) != 1 || got.RequestID != "x" {
		t.Errorf("answer reshaped to %+v, want reservation r-1 with i-old (and its tag) only", got)
	}
	if p.stats.InstancesHidden != 2 {
		t.Errorf("%d instances hidden, want 2", p.stats.InstancesHidden)
	}
	if string(p.hideInstances([]byte("<not xml"))) != "<not xml" {
		t.Error("an answer that is not XML was changed")
	}
}
