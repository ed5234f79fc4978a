// Command coredns is CoreDNS (github.com/coredns/coredns) with only the plugins
// a test cluster's DNS needs: cluster names from the API server (kubernetes),
// plus bind, errors, log, health, ready and cache. tools/realnode runs one per real node
// as the node's cluster DNS; nothing is forwarded beyond the cluster.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/ready"
)

// The order plugins see a query in, a subset of CoreDNS's own plugin.cfg order.
func init() {
	dnsserver.Directives = []string{"bind", "errors", "log", "health", "ready", "cache", "kubernetes"}
}

func main() { coremain.Run() }
