package serve

// moreRoutes adds the endpoints beside OpenAI's /v1 ones: the same
// endpoints without /v1 (llama.cpp's server accepts both), the Responses
// API, Anthropic's Messages API, embeddings, llama.cpp's /tokenize and
// /detokenize, and the chat page (webui.go) with the defaults it shows.
func (s *Server) moreRoutes() {
	s.mux.HandleFunc("/completions", s.completions)
	s.mux.HandleFunc("/chat/completions", s.chatCompletions)
	s.mux.HandleFunc("/models", s.models)
	s.mux.HandleFunc("/models/{id...}", s.model)
	s.mux.HandleFunc("/v1/responses", s.responses)
	s.mux.HandleFunc("/responses", s.responses)
	s.mux.HandleFunc("/tokenize", s.tokenize)
	s.mux.HandleFunc("/detokenize", s.detokenize)
	s.mux.HandleFunc("/v1/embeddings", s.embeddings)
	s.mux.HandleFunc("/embeddings", s.embeddings)
	s.mux.HandleFunc("GET /{$}", s.page)
	s.mux.HandleFunc("GET /ui/", s.page)
	s.mux.HandleFunc("/props", s.props)
	s.mux.HandleFunc("/v1/messages", s.messages)
	s.mux.HandleFunc("/v1/messages/count_tokens", s.countTokens)
	s.mux.HandleFunc("/v1/messages/{rest...}", s.messagesNotFound)
	s.mux.HandleFunc("/apply-template", s.applyTemplate)
}
