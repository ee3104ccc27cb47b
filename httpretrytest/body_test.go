package httpretrytest_test

import (
	"io"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/seedhq/httpretry/httpretrytest"
)

func TestBody(t *testing.T) {
	t.Parallel()
	t.Run("filler", func(t *testing.T) {
		b := httpretrytest.NewFillerBody(5)
		got, err := io.ReadAll(b)
		assert.NoError(t, err)
		assert.Equal(t, "xxxxx", string(got))
		assert.EqualValues(t, 5, b.BytesRead())
	})
	t.Run("fails at once", func(t *testing.T) {
		_, err := httpretrytest.NewBody("abc").FailAfter(0, nil).Read(make([]byte, 4))
		assert.ErrorIs(t, err, io.ErrUnexpectedEOF)
	})
	t.Run("closed", func(t *testing.T) {
		b := httpretrytest.NewBody("abc")
		assert.NoError(t, b.Close())
		assert.NoError(t, b.Close())
		assert.Equal(t, 2, b.Closes())
		_, err := b.Read(make([]byte, 4))
		assert.ErrorIs(t, err, httpretrytest.ErrBodyClosed)
	})
	t.Run("slow, in chunks", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			b := httpretrytest.NewBody("abcdefg").Slow(3, time.Second)
			start := time.Now()
			got, err := io.ReadAll(b)
			assert.NoError(t, err)
			assert.Equal(t, "abcdefg", string(got))
			assert.Equal(t, 3*time.Second, time.Since(start), "3 reads of at most 3 bytes, a second each")
		})
	})
}
