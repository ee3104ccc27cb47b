module github.com/seedhq/httpretry/scripts/testsummary

go 1.25
