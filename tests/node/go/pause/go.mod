// The pod sandbox ("pause") image's one program, for the node of tests/node: no registry here.
module hami-dra-webhook/tests/node/go/pause

go 1.26.0
