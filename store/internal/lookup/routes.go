package lookup

import "github.com/msgcenter/msgcenter/model"

// Rows is what RoutesOf reads from: *sql.Rows and pgx.Rows both are.
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}

// ScanRoutes reads rows of (did, tunnel_did, address, platform, chat_id,
// account_id, mode, priority), ordered by did and then the routes' order,
// into the routes of each of asked, in asked's order: an empty list for a
// DID without routes, so that the cache keeps the no as well.
func ScanRoutes(rows Rows, asked []string) ([][]model.ContactRoute, error) {
	byDID := make(map[string][]model.ContactRoute)
	for rows.Next() {
		var did string
		var r model.ContactRoute
		if err := rows.Scan(&did, &r.TunnelDID, &r.Address, &r.Platform, &r.ChatID, &r.AccountID,
			&r.Mode, &r.Priority); err != nil {
			return nil, err
		}
		byDID[did] = append(byDID[did], r)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	out := make([][]model.ContactRoute, len(asked))
	for i, did := range asked {
		if out[i] = byDID[did]; out[i] == nil {
			out[i] = []model.ContactRoute{}
		}
	}
	return out, nil
}

// RoutesByDID keeps, of vals (the routes of dids, in order), those of the
// DIDs that have any.
func RoutesByDID(dids []string, vals [][]model.ContactRoute) map[string][]model.ContactRoute {
	out := map[string][]model.ContactRoute{}
	for i, did := range dids {
		if len(vals[i]) > 0 {
			out[did] = vals[i]
		}
	}
	return out
}
