package outboxui

import (
	"fmt"
	"html/template"
)

// pageNames are the pages, each a template of its own on the layout.
var pageNames = []string{"overview", "records", "record", "confirm", "error"}

// funcs are the templates' functions: field encodes a value from the
// database for a form field (see encodeField).
var funcs = template.FuncMap{"field": encodeField}

// parsePages parses each page with the layout. html/template escapes
// every value by its context: text, attribute, URL.
func parsePages() (map[string]*template.Template, error) {
	pages := make(map[string]*template.Template, len(pageNames))
	for _, name := range pageNames {
		t, err := template.New(name).Funcs(funcs).ParseFS(files, "templates/layout.html", "templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("outboxui: template %s: %w", name, err)
		}
		pages[name] = t
	}
	return pages, nil
}
