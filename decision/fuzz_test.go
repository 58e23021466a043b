package decision_test

import (
	"encoding/json"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/verdict-dev/verdict/decision"
)

// fuzzLimits are the defaults and a small set that makes the size limits
// reachable by short fuzz inputs.
var fuzzLimits = []decision.Limits{
	{},
	{
		MaxStateBytes: 24, MaxQuestionBytes: 16, MinOptions: 2, MaxOptions: 4,
		MaxOptionIDBytes: 6, MaxDescriptionBytes: 8, MaxIDBytes: 6, MaxDecisions: 3,
		MaxMetadata: 2, MaxScoreLevels: 3,
	},
}

var semIfSeeds = []string{
	`{"id":"support-route","state":"Customer cannot log in.","question":"Which queue?","options":[{"id":"account_access","description":"Account access."},{"id":"billing","description":"Billing."}]}`,
	`{"decision":{"state":{"b":[1,2.50],"a":null},"question":"q","options":[{"id":"a","description":""},{"id":"b","description":"B"}],"metadata":{"t":"x"},"route":"cpu","priority":"batch","kind":"k"}}`,
	`{"decisions":[{"state":"s","question":"q","options":[{"id":"a","description":"A"},{"id":"b","description":"B"}]},{"id":"1","state":["x"],"question":"q","options":[{"id":"a","description":"A"},{"id":"b","description":"B"}]}]}`,
	`{"decisions":[]}`,
	`{"state":"","question":" ","options":[{"id":"a","description":"A"}]}`,
	`{"state":"s","question":"q","options":[{"id":"a","description":"A"},{"id":"a","description":"B"}]}`,
	`{"state":"s","question":"q","options":[{"id":" a","description":"A"},{"id":"b\u0001","description":"B"}],"metdata":{}}`,
	`{"state":"s","state":"t","question":"q","options":[]}`,
	`{"decision":{"state":"s"},"x":1}`,
	`{"state":{},"question":"q","options":[{"id":"a"},{"description":"B"}]}`,
	`{"state":"s","question":"q","options":[{"id":"a","description":"A"},{"id":"b","description":"B"}]} trailing`,
	`{"state":"s","question":`,
	`[]`,
	`null`,
	``,
	`{"state":"\ud800","question":"\u0000","options":[{"id":"\u00e9","description":"\u2028"},{"id":"b","description":"B"}]}`,
	`{"state":{"a":1,"a":2},"question":"q","options":[{"id":"a","description":"A"},{"id":"b","description":"B"}]}`,
}

var systemOneSeeds = []string{
	`{"model":"jev-latest","state":"An email.","questions":{"spam":{"type":"noul","instructions":"Is it spam?"}}}`,
	`{"state":{"t":"x"},"questions":{"u":{"type":"noul","instructions":{"q":"Urgent?"},"criteria":{"true":"Yes","false":null}}}}`,
	`{"state":["x"],"questions":{"route":{"type":"choice","instructions":"Which?","criteria":{"z":"Z","a":null,"m":"M"}}}}`,
	`{"state":"s","questions":{"q":{"type":"score","instructions":["Rate",1],"criteria":["bad","ok","good"]}}}`,
	`{"state":"s","questions":{"q":{"type":"rank","instructions":"x"}}}`,
	`{"state":"s","questions":{"q":{"type":"choice","instructions":"x","criteria":{"a":"A"}}}}`,
	`{"state":"s","questions":{"q":{"type":"score","instructions":"x","criteria":["a"," "]}}}`,
	`{"state":"s","questions":{}}`,
	`{"state":"","questions":{"":{"type":"noul"}}}`,
	`{"state":"s","questions":{"a":{"type":"noul","instructions":"x"},"a":{"type":"noul","instructions":"y"}}}`,
	`{"model":1,"state":"s","questions":[],"extra":true}`,
	`{"state":"s","questions":{"q":{"type":"noul","instructions":"x","criteria":{"maybe":"?"}}}}`,
	`{"state":"s","questions":{"q":{"type":"choice","instructions":"x","criteria":{"a":{"k":[1]},"b":"B"}}}}`,
	`{"state":"s","questions":`,
	`{}`,
}

func FuzzParseSemIf(f *testing.F) {
	for _, s := range semIfSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, lim := range fuzzLimits {
			ds, shape, err := decision.ParseSemIf(data, lim)
			if err != nil {
				require.Nil(t, ds)
				requireOneClass(t, err)
				continue
			}
			require.NotEmpty(t, ds)
			if shape != decision.ShapeBatch {
				require.Len(t, ds, 1)
			}
			ids := map[string]bool{}
			for _, d := range ds {
				requireSound(t, d, lim)
				if shape == decision.ShapeBatch {
					require.NotEmpty(t, d.ID)
					require.False(t, ids[d.ID], "duplicate id %q", d.ID)
					ids[d.ID] = true
				}
			}
		}
	})
}

func FuzzParseSystemOne(f *testing.F) {
	for _, s := range systemOneSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, lim := range fuzzLimits {
			req, err := decision.ParseSystemOne(data, lim)
			if err != nil {
				require.Nil(t, req)
				requireOneClass(t, err)
				continue
			}
			require.NotEmpty(t, req.Questions)
			ds := req.Decisions()
			require.Len(t, ds, len(req.Questions))
			for i, d := range ds {
				q := req.Questions[i]
				require.Equal(t, q.Key, d.ID)
				switch q.Type {
				case decision.TypeNoul:
					require.Equal(t, []string{"true", "false"}, d.OptionIDs())
				case decision.TypeChoice:
				case decision.TypeScore:
					for j, o := range d.Options {
						require.Equal(t, strconv.Itoa(j), o.ID)
					}
				default:
					t.Fatalf("question %q has type %q", q.Key, q.Type)
				}
				requireSound(t, d, lim)
			}
			// LooksLikeSystemOne agrees with the parser on what it accepts.
			require.True(t, decision.LooksLikeSystemOne(data))
		}
	})
}

// requireSound checks that an accepted decision passes Validate and
// survives a JSON round trip through the SemIf parser unchanged.
func requireSound(t *testing.T, d decision.Decision, lim decision.Limits) {
	t.Helper()
	require.NoError(t, d.Validate(lim, ""))
	b, err := json.Marshal(d)
	require.NoError(t, err)
	back, err := decision.ParseSemIfDecision(b, lim)
	require.NoError(t, err, "re-parsing %s", b)
	require.Equal(t, normalize(d), normalize(back))
}
