// Command printinfo prints buildinfo.Read() one field a line, for buildinfo's tests: they
// build it as the go command builds web3gate and compare what it prints with the checkout.
package main

import (
	"fmt"

	"github.com/web3gate/web3gate/internal/buildinfo"
)

func main() {
	i := buildinfo.Read()
	fmt.Printf("%s\n%s\n%t\n%s\n", i.Version, i.Revision, i.Modified, i.GoVersion)
}
