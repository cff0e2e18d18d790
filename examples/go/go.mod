module github.com/fencelock/fencelock/examples/go

go 1.24

require github.com/fencelock/fencelock/bindings/go v0.0.0

replace github.com/fencelock/fencelock/bindings/go => ../../bindings/go
