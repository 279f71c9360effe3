from pedidos.app import SERVICE, create
from sagakit.runtime import serve

if __name__ == "__main__":
    serve(create, SERVICE)
