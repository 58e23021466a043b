package calibrate_test

import "math"

func ln(x float64) float64 { return math.Log(x) }
