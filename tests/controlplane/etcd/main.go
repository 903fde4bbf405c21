// Command etcd is etcd's own server entry point (go.etcd.io/etcd/server/v3/etcdmain), built
// here because the etcd main module is not published on the module proxy; only its server module is.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
