module github.com/llamaloop/llamaloop

go 1.24.1

require github.com/ollama/ollama v0.17.4

require (
	github.com/stretchr/testify v1.12.1
	go.yaml.in/yaml/v3 v3.0.5 // indirect
)
