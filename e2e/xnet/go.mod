module github.com/seedhq/httpretry/e2e/xnet

go 1.26.0

replace github.com/seedhq/httpretry => ../..

require (
	github.com/seedhq/httpretry v0.0.0-00010101000000-000000000000
	golang.org/x/net v0.43.0
)

require (
	github.com/google/uuid v1.6.0 // indirect
	github.com/hashicorp/go-cleanhttp v0.5.2 // indirect
	github.com/sony/gobreaker/v2 v2.4.0 // indirect
	golang.org/x/text v0.28.0 // indirect
)
