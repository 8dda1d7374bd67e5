package pgdsn

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCheck: which DSNs pass, and the rule each refused one breaks.
// store/postgres's tests check the passing ones against pgx's parse.
func TestCheck(t *testing.T) {
	for _, tc := range []struct{ dsn, reason string }{
		// URLs that mean one thing.
		{"postgres://app:S3cret@db:5432/rooms?sslmode=disable", ""},
		{"postgresql://app@db/rooms", ""},
		{"postgres://app:p%40ss%23w0rd%2F%3A%3F%25%20@127.0.0.1:5432/rooms", ""},
		{"postgres://:pw@db/rooms", ""},
		{"postgres://app:@db/rooms", ""},
		{"postgres://app:it's(ok)!*+,;=&$~@db/rooms", ""},
		{"postgres://db1:5432,db2:5433,[::1]:5434,[fe80::1%25eth0]/rooms", ""},
		{"postgres://%2Fvar%2Frun%2Fpostgresql/rooms", ""},
		{"postgres:///rooms?host=/var/run/postgresql", ""},
		{"postgres://app@db/rooms?search_path=app&application_name=ctl", ""},
		{"postgres://app@db/rooms?password=pw%26x&sslmode=require", ""},
		{"postgres://app@db", ""},
		{"postgres://", ""},
		{"postgres://app@db/?sslmode=disable", ""},
		// URLs that pgx reads otherwise than meant, or that are unclear.
		{"postgres://USER:/S3cret-pg-PW@db:5432/rooms", reasonAtAfterHost},
		{"postgres://postgres:p@ss#w0rd@127.0.0.1:5432/rooms", reasonHash},
		{"postgres://postgres:p@ss:w0rd@127.0.0.1:5432/rooms", reasonAts},
		{"postgres://app:pa?ss@db/rooms", reasonAtAfterHost},
		{"postgres://app:pa:ss@db/rooms", reasonColons},
		{"postgres://app:pa ss@db/rooms", reasonUserinfoChars},
		{"postgres://app:pä@db/rooms", reasonUserinfoChars},
		{"postgres://app:p\x01@db/rooms", reasonUserinfoChars},
		{"postgres://app:p%zz@db/rooms", reasonPercent},
		{"postgres://app:p%00@db/rooms", reasonPercent},
		{"postgres://app:p%4@db/rooms", reasonPercent},
		{"postgres://app:secret/word", reasonHosts},
		{"postgres://app@d b/rooms", reasonHosts},
		{"postgres://app@[::1/rooms", reasonHosts},
		{"postgres://app@[::1]x/rooms", reasonHosts},
		{"postgres://app@db:54a/rooms", reasonHosts},
		{"postgres://app@db/ro/oms", reasonDatabase},
		{"postgres://app@db/ro oms", reasonDatabase},
		{"postgres://app@db/rooms?sslmode", reasonQueryPair},
		{"postgres://app@db/rooms?a=b=c", reasonQueryPair},
		{"postgres://app@db/rooms?a=1&&b=2", reasonQueryPair},
		{"postgres://app@db/rooms?pass%77ord=x", reasonQueryKey},
		{"postgres://app@db/rooms?password=a?b", reasonQueryValue},
		{"postgres://app@db/rooms?password=a b", reasonQueryValue},
		{"postgres://app@db/rooms?password=a+b", reasonQueryValue},
		{"postgres://app@db/rooms?sslmode=disable&sslmode=require", reasonTwice},
		{"postgres://app:pw@db/rooms?password=other", reasonTwice},
		{"postgres://app@db/rooms?dbname=other", reasonTwice},
		{"postgres://app@db:5432/rooms?port=5433", reasonTwice},
		{"postgres://app@db/rooms?password=Secret&tail=x", reasonSecretBeside},
		{"postgres://app@db/rooms?password=Sec&ret=x", reasonSecretBeside},
		// key=value DSNs.
		{"host=db user=app password=S3cret/@#:?% dbname=rooms", ""},
		{"host = db  user=app password='p ss \\' \\\\ x' dbname=rooms", ""},
		{"host=db password=ab\\ cd dbname=rooms", ""},
		{"host=db password=S3cret\\\\ dbname=rooms", ""},
		{"host=db password='' dbname=rooms", ""},
		{"host=db password= dbname=rooms", reasonEquals},
		{"host=db password=a=b dbname=rooms", reasonEquals},
		{"host=db password=pä\xff\xfess dbname=rooms", ""},
		{"host=db dbname=rooms search_path=app", ""},
		{"  host=db\tdbname=rooms\n", ""},
		{"", ""},
		{"host=db password=S3cret pgPW dbname=rooms", reasonKeyName},
		{"host=db password=abcd efgh=ijkl", reasonKeySecret},
		{"host=db password='' dbname=rooms options='-c search_path=app'", ""},
		{"host=db password=S3cret dbname=rooms", ""},
		{"host=db password='S3cret dbname=rooms", reasonUnclosed},
		{"host=db password='S3'cret dbname=rooms", reasonAfterQuote},
		{"host=db password=S3cret\\", reasonLoneBackslash},
		{"host=db password=S3\x01cret", reasonControl},
		{"host=db password=S3\\\x01cret", reasonControl},
		{"host=db dbname=rooms database=other", reasonKeyTwice},
		{"host=db host=other", reasonKeyTwice},
		{"host", reasonNoEquals},
		{"=x", reasonKeyName},
		{"app:pw@tcp(db:3306)/rooms", reasonNoEquals},
		{"app:pa=ss@tcp(db:3306)/rooms", reasonKeyName},
	} {
		err := Check(tc.dsn)
		if tc.reason == "" {
			require.NoError(t, err, "%q", tc.dsn)
			continue
		}
		var e *Error
		require.ErrorAs(t, err, &e, "%q", tc.dsn)
		require.Equal(t, tc.reason, e.Reason, "%q", tc.dsn)
		require.ErrorIs(t, err, ErrAmbiguous)
		require.True(t, strings.HasPrefix(err.Error(), "does not parse unambiguously ("), err.Error())
	}
	require.ErrorContains(t, Check("postgres://a@b/c\x00"), "NUL")
	require.ErrorContains(t, Check("host=b\x00"), "NUL")
}

func TestLooks(t *testing.T) {
	for dsn, want := range map[string]bool{
		"postgres://a@b/c":          true,
		"postgresql://b/c":          true,
		"host=db dbname=rooms":      true,
		" password = x host=db":     true,
		"sslmode=disable host=db":   true,
		"app:pw@tcp(db:3306)/rooms": false,
		"app:pa=ss@tcp(db)/rooms":   false,
		"mysql://app@db/rooms":      false,
		"":                          false,
	} {
		require.Equal(t, want, Looks(dsn), "%q", dsn)
	}
}

// reasons are every text an Error can carry.
var reasons = []string{
	"it holds a NUL byte", reasonHash, reasonAts, reasonAtAfterHost, reasonColons, reasonUserinfoChars,
	reasonHosts, reasonDatabase, reasonPercent, reasonQueryPair, reasonQueryKey, reasonQueryValue,
	reasonTwice, reasonSecretBeside, reasonNoEquals, reasonKeyName, reasonUnclosed, reasonAfterQuote,
	reasonLoneBackslash, reasonControl, reasonEquals, reasonKeyTwice, reasonKeySecret,
}

// FuzzCheckQuotesNothing: whatever the DSN, Check does not panic and its
// error is one of the fixed texts, so it can quote nothing of the DSN.
func FuzzCheckQuotesNothing(f *testing.F) {
	for _, s := range []string{"postgres://u:p@ss#w0rd@h/db", "postgresql://u:%zz@h:1,[::1]:2/d?password=x&y=z",
		"host=h password='a b' dbname=d", "host=h password=a\\", "user=u password=a b=c", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, dsn string) {
		err := Check(dsn)
		if err == nil {
			return
		}
		var e *Error
		if !errors.As(err, &e) || !slices.Contains(reasons, e.Reason) || (e.How != URLHow && e.How != KeywordHow) {
			t.Fatalf("Check(%q) = %v: not a fixed text", dsn, err)
		}
	})
}
