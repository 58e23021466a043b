package main

import (
	"context"
	"fmt"

	"github.com/verdict-dev/verdict/internal/calibrate"
)

func runCalibrate(ctx context.Context, args []string) error {
	fs := newFlagSet("calibrate", "calibrate [flags] [DIR] -o calibration.json")
	var ef engineFlags
	var lf logFlags
	var bf batchFlags
	var l labeledFlags
	ef.register(fs)
	lf.register(fs)
	bf.register(fs)
	l.register(fs)
	out := fs.String("o", "", "write the calibration file here (required)")
	folds := fs.Int("folds", 5, "folds of the out-of-fold ECE check")
	bins := fs.Int("bins", 10, "equal-width ECE bins")
	targets := fs.String("target", "0.8,0.9,0.95", "target accuracies for the min_probability suggestions")
	kind := fs.String("kind", "default", "policy kind named in the suggested snippet")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if err := lf.setup(); err != nil {
		return err
	}
	if *out == "" {
		return fmt.Errorf("flag -o: required")
	}
	if *folds < 2 {
		return fmt.Errorf("flag --folds: must be at least 2, got %d", *folds)
	}
	tg, err := parseTargets(*targets)
	if err != nil {
		return err
	}
	if err := l.resolve(pos); err != nil {
		return fmt.Errorf("calibrate: %w", err)
	}
	if ef.calibration != "" {
		return fmt.Errorf("flag --calibration: fit on uncalibrated results (the fit reads raw logits either way; drop the flag)")
	}
	m, err := labeled(ctx, &l, &ef, &bf, "")
	if err != nil {
		return err
	}
	var ss []calibrate.Sample
	f := calibrate.File{}
	for i, r := range m.Results {
		e := m.Examples[i]
		if !e.Valid() || len(r.OptionLogits) != len(r.OptionIDs) {
			continue
		}
		sha, pv := "", r.PromptVersion
		if r.Model != nil {
			sha = r.Model.SHA256
		}
		if f.ModelSHA256 == "" {
			f.ModelSHA256, f.PromptVersion = sha, pv
			if r.Model != nil {
				f.ModelFile = r.Model.File
			}
		} else if sha != f.ModelSHA256 || pv != f.PromptVersion {
			return fmt.Errorf("calibrate: results of more than one model or prompt (%s %s and %s %s): fit each apart", short(f.ModelSHA256), f.PromptVersion, short(sha), pv)
		}
		if r.Debias != nil {
			f.Debias = r.Debias.Rotations
		}
		ss = append(ss, calibrate.Sample{Logits: r.OptionLogits, Gold: e.Gold})
	}
	if len(ss) < *folds {
		return fmt.Errorf("calibrate: %d labeled results with logits, want at least --folds (%d)", len(ss), *folds)
	}
	if len(f.ModelSHA256) != 64 || f.PromptVersion == "" {
		return fmt.Errorf("calibrate: the results do not name their model sha256 and prompt_version; score them with verdict")
	}
	f.Temperature = calibrate.FitTemperature(ss)
	f.Samples = len(ss)
	f.CrossValidation = calibrate.CrossValidate(ss, *folds, *bins)
	f.Thresholds = calibrate.Thresholds(ss, f.Temperature, tg)
	if err := f.Write(*out); err != nil {
		return fmt.Errorf("flag -o: %w", err)
	}
	cv := f.CrossValidation
	fmt.Printf("fitted temperature %.4f on %d labeled decisions (model %s, prompt %s)\n", f.Temperature, f.Samples, short(f.ModelSHA256), f.PromptVersion)
	fmt.Printf("%d-fold out-of-fold ECE %.4f → %.4f, NLL %.4f → %.4f (fold temperatures %.3v)\n", cv.Folds, cv.ECEBefore, cv.ECEAfter, cv.NLLBefore, cv.NLLAfter, cv.FoldTemperatures)
	fmt.Printf("wrote %s; apply it with --calibration %s (score, batch, eval, serve, worker, up)\n\n", *out, *out)
	fmt.Printf("# suggested thresholds (calibrated probabilities, this labeled set)\nkinds:\n  %s:\n", *kind)
	first := true
	for _, t := range f.Thresholds {
		if !t.Reached {
			fmt.Printf("    # accuracy %.2f: no threshold reaches it on this set\n", t.Target)
			continue
		}
		prefix := "# "
		if first {
			prefix, first = "", false
		}
		fmt.Printf("    %smin_probability: %.4f  # accuracy %.4f (target %.2f) at coverage %.4f\n", prefix, t.MinProbability, t.Accuracy, t.Target, t.Coverage)
	}
	fmt.Printf("    fallback: review\n")
	return nil
}

func short(s string) string {
	if len(s) > 12 {
		return s[:12]
	}
	return s
}
