// A tiny DNS client for the real-client matrix (tests/e2e/test_clients.py): Go's own resolver
// (net.Resolver with PreferGo, as GODEBUG=netdns=go), built at test time from the standard library.
//
//	goclient addr NAME    the addresses LookupHost finds, one per line
//	goclient srv NAME     the SRV records LookupSRV finds: "priority weight port target"
//
// Exit status 2 when the name does not resolve (the error on stderr).
package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"time"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: goclient addr|srv NAME")
		os.Exit(64)
	}
	r := &net.Resolver{PreferGo: true}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	name := os.Args[2]
	switch os.Args[1] {
	case "addr":
		addrs, err := r.LookupHost(ctx, name)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		for _, a := range addrs {
			fmt.Println(a)
		}
	case "srv":
		_, srvs, err := r.LookupSRV(ctx, "", "", name)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		for _, s := range srvs {
			fmt.Printf("%d %d %d %s\n", s.Priority, s.Weight, s.Port, s.Target)
		}
	default:
		fmt.Fprintln(os.Stderr, "usage: goclient addr|srv NAME")
		os.Exit(64)
	}
}
