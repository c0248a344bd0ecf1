package studio

import (
	"errors"
	"net"
)

var netTCPAddr = net.TCPAddr{IP: net.IPv4zero, Port: 1234}

// fakeListener only has an address: Serve must refuse it before accepting anything.
type fakeListener struct{ addr net.Addr }

func (l fakeListener) Accept() (net.Conn, error) { return nil, errors.New("not a real listener") }
func (l fakeListener) Close() error              { return nil }
func (l fakeListener) Addr() net.Addr            { return l.addr }
