module github.com/seedhq/httpretry/examples/fleet

go 1.26.0

replace (
	github.com/seedhq/httpretry => ../..
	github.com/seedhq/httpretry/fleet => ../../fleet
)

require (
	github.com/redis/rueidis v1.0.80
	github.com/seedhq/httpretry v0.0.0
	github.com/seedhq/httpretry/fleet v0.0.0
)

require (
	github.com/google/uuid v1.6.0 // indirect
	github.com/hashicorp/go-cleanhttp v0.5.2 // indirect
	github.com/sony/gobreaker/v2 v2.4.0 // indirect
	golang.org/x/sys v0.50.0 // indirect
)
