module github.com/seedhq/httpretry/examples/stripe

go 1.25

replace github.com/seedhq/httpretry => ../..

require (
	github.com/seedhq/httpretry v0.0.0-00010101000000-000000000000
	github.com/stretchr/testify v1.12.1
	github.com/stripe/stripe-go/v82 v82.5.1
)

require (
	github.com/google/uuid v1.6.0 // indirect
	github.com/hashicorp/go-cleanhttp v0.5.2 // indirect
	github.com/sony/gobreaker/v2 v2.4.0 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
)
