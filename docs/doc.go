// Package docs holds the checks of the repository's markdown: relative links and anchors
// resolve, README.md stays short, and the example configuration it offers loads.
package docs
