// Command etcd is upstream etcd's server, built at the version the pinned
// Kubernetes release depends on, so the control plane needs no other download.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
