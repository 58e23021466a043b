// Package calibrate fits a temperature on labeled results by minimizing
// the negative log-likelihood (FitTemperature), checks it out of fold
// (CrossValidate), suggests min_probability thresholds for target
// accuracies (Thresholds), and reads and writes the calibration file that
// pins the temperature to one model sha256 and prompt version (Load,
// Check). Package tune applies it.
package calibrate
