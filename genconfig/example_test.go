package genconfig_test

import (
	"fmt"

	"github.com/llamaloop/llamaloop/genconfig"
)

// Optional fields are pointers: new(expr) sets one in place, and Update
// sets any field from JSON, as a generation_config.json does. Validate's
// errors name the field and what to do.
func Example() {
	cfg := genconfig.Default()
	cfg.MaxNewTokens = new(32)
	cfg.MinP = new(0.05)
	cfg.PadTokenID = new(int32(2))
	if err := cfg.Update([]byte(`{"do_sample": true, "temperature": 0.7, "top_k": 40}`)); err != nil {
		fmt.Println(err)
		return
	}
	if _, err := cfg.Validate(0); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(*cfg.MaxNewTokens, *cfg.MinP, *cfg.PadTokenID, cfg.DoSample, cfg.Temperature, cfg.TopK)

	cfg.Temperature = 0
	_, err := cfg.Validate(0)
	fmt.Println(err)
	// Output:
	// 32 0.05 2 true 0.7 40
	// genconfig: temperature (=0) has to be a strictly positive float; for greedy decoding set do_sample=false instead of temperature 0
}
