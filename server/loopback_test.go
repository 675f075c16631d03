package server

import (
	"net"
	"testing"
)

func TestLoopback(t *testing.T) {
	for _, tc := range []struct {
		addr net.Addr
		want string
	}{
		{&net.TCPAddr{IP: net.IPv4zero, Port: 7420}, "127.0.0.1:7420"},
		{&net.TCPAddr{IP: net.IPv6unspecified, Port: 7420}, "[::1]:7420"},
		{&net.TCPAddr{IP: net.IPv4(10, 0, 0, 5), Port: 7420}, "10.0.0.5:7420"},
		{&net.TCPAddr{IP: net.IPv6loopback, Port: 7420}, "[::1]:7420"},
	} {
		if got := loopback(tc.addr); got != tc.want {
			t.Errorf("loopback(%s) = %s, want %s", tc.addr, got, tc.want)
		}
	}
}
