package rounds

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestEachTurnsTheOrder(t *testing.T) {
	var got []string
	err := Each(4, []string{"a", "b", "c"}, func(r int, v string) error {
		got = append(got, v)
		return nil
	})
	assert.NoError(t, err)
	assert.Equal(t, []string{"a", "b", "c", "b", "c", "a", "c", "a", "b", "a", "b", "c"}, got)

	stop := errors.New("stop")
	n := 0
	err = Each(3, []int{1, 2}, func(int, int) error { n++; return stop })
	assert.ErrorIs(t, err, stop)
	assert.Equal(t, 1, n)
}

func TestOf(t *testing.T) {
	assert.Equal(t, Spread{2, 1, 5}, Of([]float64{5, 1, 2}))
	assert.Equal(t, Spread{}, Of(nil))
}
