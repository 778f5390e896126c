package faultproxy

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// namesInstances are the EC2 actions that fail with
// InvalidInstanceID.NotFound when they name an instance EC2 does not know
// yet (realism.EC2Lag), by the form keys InstanceId, InstanceId.N or
// ResourceId.N.
var namesInstances = map[string]bool{
	"DescribeInstances": true, "TerminateInstances": true, "StopInstances": true, "StartInstances": true,
	"CreateTags": true, "DeleteTags": true, "ModifyInstanceAttribute": true,
}

// lagging tells whether a request is one realism.EC2Lag acts on: a launch
// (to learn its instances) or a request that may name or list them.
func (p *Proxy) lagging(service, action string) bool {
	p.mu.Lock()
	on := p.realism.EC2Lag > 0
	p.mu.Unlock()
	return on && service == "ec2" && (namesInstances[action] || action == "RunInstances" || action == "CreateFleet")
}

// forwardLagging forwards an EC2 request as EC2 answers it while instances
// launched less than realism.EC2Lag ago are still unknown to it: a request
// naming one fails with InvalidInstanceID.NotFound without being carried
// out, a DescribeInstances answer leaves them out, and a launch's
// instances are remembered.
func (p *Proxy) forwardLagging(w http.ResponseWriter, r *http.Request, action string, body []byte) {
	if unknown := p.unknownNamed(action, body); len(unknown) > 0 {
		msg := fmt.Sprintf("The instance ID '%s' does not exist", unknown[0])
		if len(unknown) > 1 {
			msg = fmt.Sprintf("The instance IDs '%s' do not exist", strings.Join(unknown, ", "))
		}
		writeEC2Error(w, http.StatusBadRequest, "InvalidInstanceID.NotFound", msg)
		return
	}
	switch action {
	case "RunInstances", "CreateFleet":
		p.forwardRewritten(w, r, func(answer []byte) []byte {
			p.noteLaunches(answer)
			return answer
		})
	case "DescribeInstances":
		p.forwardRewritten(w, r, p.hideInstances)
	default:
		p.forward.ServeHTTP(w, r)
	}
}

// unknownNamed returns the instances a request names that EC2 does not
// know yet, and counts the request if there are any.
func (p *Proxy) unknownNamed(action string, body []byte) []string {
	if !namesInstances[action] {
		return nil
	}
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return nil
	}
	var unknown []string
	for key, values := range form {
		if key == "InstanceId" || strings.HasPrefix(key, "InstanceId.") || strings.HasPrefix(key, "ResourceId.") {
			for _, id := range values {
				if p.unknown(id) {
					unknown = append(unknown, id)
				}
			}
		}
	}
	if len(unknown) > 0 {
		p.mu.Lock()
		p.stats.InstancesNotFound++
		p.mu.Unlock()
	}
	return unknown
}

// unknown tells whether instance id was launched less than EC2Lag ago.
func (p *Proxy) unknown(id string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	at, ok := p.launched[id]
	if ok && time.Since(at) >= p.realism.EC2Lag {
		delete(p.launched, id)
		ok = false
	}
	return ok
}

// noteLaunches remembers the instances a RunInstances or CreateFleet answer
// launched, with realism.EC2Lag on; other answers are ignored.
func (p *Proxy) noteLaunches(answer []byte) {
	p.mu.Lock()
	on := p.realism.EC2Lag > 0
	p.mu.Unlock()
	if !on {
		return
	}
	var launch struct {
		XMLName   xml.Name
		Instances []string `xml:"instancesSet>item>instanceId"`           // RunInstances
		Fleet     []string `xml:"fleetInstanceSet>item>instanceIds>item"` // CreateFleet
	}
	if xml.Unmarshal(answer, &launch) != nil {
		return
	}
	ids := launch.Fleet
	if launch.XMLName.Local == "RunInstancesResponse" {
		ids = launch.Instances
	} else if launch.XMLName.Local != "CreateFleetResponse" {
		return
	}
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	for id, at := range p.launched { // known by now
		if now.Sub(at) >= p.realism.EC2Lag {
			delete(p.launched, id)
		}
	}
	for _, id := range ids {
		p.launched[id] = now
	}
}

// hideInstances removes from a DescribeInstances answer the instances EC2
// does not know yet, and the reservations they leave empty, cutting their
// elements out of the XML so that the rest is passed on as it was.
func (p *Proxy) hideInstances(answer []byte) []byte {
	p.mu.Lock()
	none := len(p.launched) == 0
	p.mu.Unlock()
	if none {
		return answer
	}
	const (
		reservation = "reservationSet/item"
		instance    = reservation + "/instancesSet/item"
		instanceID  = instance + "/instanceId"
	)
	d := xml.NewDecoder(bytes.NewReader(answer))
	var path []string // below the root
	var cuts [][2]int64
	var resStart, instStart int64
	var instances, hidden, depth, total int
	var id strings.Builder
	for {
		start := d.InputOffset()
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return answer
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			if depth++; depth > 1 {
				path = append(path, tok.Name.Local)
			}
			switch strings.Join(path, "/") {
			case reservation:
				resStart, instances, hidden = start, 0, 0
			case instance:
				instStart = start
				id.Reset()
			}
		case xml.CharData:
			if strings.Join(path, "/") == instanceID {
				id.Write(tok)
			}
		case xml.EndElement:
			switch strings.Join(path, "/") {
			case instance:
				instances++
				if p.unknown(strings.TrimSpace(id.String())) {
					hidden++
					total++
					cuts = append(cuts, [2]int64{instStart, d.InputOffset()})
				}
			case reservation:
				if instances > 0 && hidden == instances {
					cuts = append(cuts[:len(cuts)-hidden], [2]int64{resStart, d.InputOffset()})
				}
			}
			if depth--; len(path) > 0 {
				path = path[:len(path)-1]
			}
		}
	}
	if len(cuts) == 0 {
		return answer
	}
	var out bytes.Buffer
	var from int64
	for _, c := range cuts {
		out.Write(answer[from:c[0]])
		from = c[1]
	}
	out.Write(answer[from:])
	p.mu.Lock()
	p.stats.InstancesHidden += total
	p.mu.Unlock()
	return out.Bytes()
}
