// The one place where libmariadb's client errors (2000..2999) and the server's error
// numbers become warden::Error.
#include <errmsg.h>
#include <mysqld_error.h>

#include <string>

#include "engines/mysql/connection.h"
#include "warden/error.h"

namespace warden::engines::mysql {

bool is_connection_error(unsigned int code) {
  switch (code) {
    case CR_CONNECTION_ERROR:
    case CR_CONN_HOST_ERROR:
    case CR_SERVER_GONE_ERROR:
    case CR_SERVER_LOST:
    case CR_SERVER_LOST_EXTENDED:
    case CR_UNKNOWN_HOST:
    case CR_COMMANDS_OUT_OF_SYNC:
    case ER_CONNECTION_KILLED:
    case ER_SERVER_SHUTDOWN:
      return true;
    default:
      return false;
  }
}

void throw_mysql_error(unsigned int code, std::string_view message, std::string_view what) {
  const std::string text = "mysql: " + std::string(what) + ": " + std::string(message) + " (" +
                           std::to_string(code) + ")";
  switch (code) {
    case ER_ACCESS_DENIED_ERROR:       // wrong user or password
    case ER_DBACCESS_DENIED_ERROR:     // no rights on the database
    case ER_TABLEACCESS_DENIED_ERROR:  // "CREATE command denied ... for table"
    case ER_COLUMNACCESS_DENIED_ERROR:
    case ER_PROCACCESS_DENIED_ERROR:       // "EXECUTE / ALTER ROUTINE command denied"
    case ER_SPECIFIC_ACCESS_DENIED_ERROR:  // "you need the X privilege"
    case ER_ACCESS_DENIED_NO_PASSWORD_ERROR:
    case ER_BINLOG_CREATE_ROUTINE_NEED_SUPER:
      throw Error(Errc::permission_denied, text);
    case ER_BAD_DB_ERROR:  // unknown database: fix the URI
      throw Error(Errc::invalid_argument, text);
    case ER_CON_COUNT_ERROR:
    case ER_TOO_MANY_USER_CONNECTIONS:
    case ER_OUT_OF_RESOURCES:
      throw Error(Errc::resource_exhausted, text);
    case ER_LOCK_WAIT_TIMEOUT:
      throw Error(Errc::deadline_exceeded, text);
    default:
      break;
  }
  if (is_connection_error(code) || code == ER_QUERY_INTERRUPTED || (code >= 2000 && code < 3000)) {
    throw Error(Errc::unavailable, text);
  }
  throw Error(Errc::internal, text);
}

}  // namespace warden::engines::mysql
