package config

import (
	"cmp"
	"math"
	"reflect"

	"github.com/seedhq/httpretry"
)

// budgetIn returns the NewBudget function c describes.
func (e *errList) budgetIn(c Budget, path []string) func(string) httpretry.Budget {
	at := func(field string) []string { return under(path, field) }
	kind := cmp.Or(c.Kind, budgetTokenBucket)
	if e.name(kind, budgetKinds, at("kind")) < 0 {
		return nil
	}
	if kind == budgetDefault {
		kind = budgetTokenBucket
	}
	numbers := []struct {
		name, kind string
		set        bool
	}{
		{"capacity", budgetTokenBucket, c.Capacity != 0},
		{"retry_cost", budgetTokenBucket, c.RetryCost != 0},
		{"timeout_cost", budgetTokenBucket, c.TimeoutCost != 0},
		{"success_credit", budgetTokenBucket, c.SuccessCredit != 0},
		{"ratio", budgetRatio, c.Ratio != 0},
		{"window", budgetRatio, c.Window != ""},
		{"min_per_second", budgetRatio, c.MinPerSecond != 0},
	}
	for _, n := range numbers {
		if n.set && n.kind != kind {
			e.config(at(n.name), "belongs to kind %q, not %q", n.kind, kind)
		}
	}
	switch kind {
	case budgetNone:
		return httpretry.NoBudget
	case budgetRatio:
		rc := httpretry.RatioConfig{Ratio: c.Ratio, MinPerSecond: c.MinPerSecond}
		if !(c.Ratio >= 0) || math.IsInf(c.Ratio, 0) {
			e.policy(at("ratio"), "%v is not a number ≥ 0", c.Ratio)
		}
		if math.IsNaN(c.MinPerSecond) || math.IsInf(c.MinPerSecond, 0) {
			e.policy(at("min_per_second"), "%v is not a number", c.MinPerSecond)
		}
		if c.Window != "" {
			if d, ok := e.duration(c.Window, at("window")); ok && d < 0 {
				e.policy(at("window"), "%v is negative", d)
			} else {
				rc.Window = d
			}
		}
		return func(string) httpretry.Budget { return httpretry.NewRatioBudget(rc) }
	}
	tc := httpretry.TokenBucketConfig{Capacity: c.Capacity, RetryCost: c.RetryCost, TimeoutCost: c.TimeoutCost, SuccessCredit: c.SuccessCredit}
	for _, n := range []struct {
		name string
		v    int
	}{{"capacity", tc.Capacity}, {"retry_cost", tc.RetryCost}, {"timeout_cost", tc.TimeoutCost}, {"success_credit", tc.SuccessCredit}} {
		if n.v < 0 {
			e.policy(at(n.name), "%d is negative", n.v)
		}
	}
	if tc == (httpretry.TokenBucketConfig{}) {
		return httpretry.DefaultBudget
	}
	return func(string) httpretry.Budget { return httpretry.NewTokenBucket(tc) }
}

// budgetOut names f, which must be DefaultBudget or NoBudget.
func (e *errList) budgetOut(f func(string) httpretry.Budget, path []string) Budget {
	switch reflect.ValueOf(f).Pointer() {
	case reflect.ValueOf(httpretry.DefaultBudget).Pointer():
		return Budget{Kind: budgetTokenBucket}
	case reflect.ValueOf(httpretry.NoBudget).Pointer():
		return Budget{Kind: budgetNone}
	}
	e.config(path, "a function other than DefaultBudget and NoBudget has no config form")
	return Budget{}
}
