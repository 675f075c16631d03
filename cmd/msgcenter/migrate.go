package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/msgcenter/msgcenter/server"
)

func newMigrateCmd(g *globals) *cobra.Command {
	var storeKind, postgresURL string
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Apply pending schema migrations to the store and exit",
		Long: `Apply pending schema migrations and exit. serve does the same at start;
run this first to upgrade a PostgreSQL database shared by several nodes
before starting the new version on them. A node refuses to run against a
schema newer than it knows.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if storeKind, postgresURL, err = storeFlags(cmd, g, storeKind, postgresURL); err != nil {
				return err
			}
			n, err := server.Migrate(cmd.Context(), server.Config{DataDir: g.DataDir, Store: storeKind, PostgresURL: postgresURL})
			if err != nil {
				return err
			}
			return g.emit(cmd, map[string]any{"applied": n}, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "schema up to date (%d migrations applied now)\n", n)
				return err
			})
		},
	}
	addStoreFlags(cmd, &storeKind, &postgresURL)
	return cmd
}
